//! The payload's envelope read by the cursor (issue 30). serde's read of the envelope reads the
//! object to its end to capture it, and the lean read then reads it again: a third of a JobSet
//! CREATE's reading. Here a JobSet's object is lean read where the envelope meets it, once; the
//! lean read checks what it reads as serde would.
//!
//! Every other value is checked as serde checks what it skips, so the payloads read here are
//! ones serde reads, to the same parts. Anything this read is not sure of (a key with an
//! escape or met twice, a kind that is not an object, a string where serde would take `null`)
//! is `None`, and the payload goes to serde, which also gives every error in its words.
use super::heads::{Head, JOBSET_GROUP};
use crate::arena;
use crate::json_text::Cursor;
use crate::views::lean_tree::{self, JOBSET_POD_SPECS};
use std::borrow::Cow;

/// The payload's head; `None` where only serde can say.
pub(super) fn read(payload: &str) -> Option<Head<'_>> {
    let mut c = Cursor::new(payload);
    let (mut request, mut settings) = (None, None);
    c.object(|c, key| match key.plain()? {
        "request" => once(&mut request, read_request(c)?),
        "settings" => once(&mut settings, nullable(c)?),
        _ => c.skip_valid().map(drop),
    })?;
    if !c.at_end() {
        return None;
    }
    let mut head = request?;
    head.settings = settings.flatten();
    Some(head)
}

fn read_request<'a>(c: &mut Cursor<'a>) -> Option<Head<'a>> {
    let (mut kind, mut operation, mut namespace) = (None, None, None);
    let (mut object, mut old_object) = (None, None);
    let mut object_read = None;
    c.object(|c, key| match key.plain()? {
        "kind" => once(&mut kind, read_kind(c)?),
        "operation" => once(&mut operation, string(c)?),
        "namespace" => once(&mut namespace, string(c)?),
        // A JobSet's object, lean read here, which checks it as serde would. The kind comes
        // first from the API server, and in any payload whose keys are sorted.
        "object" if is_jobset(&kind) => {
            let (read, text) = c.apart(|rest| {
                arena::building_tree(|| {
                    lean_tree::read_first_with_templates(rest, &JOBSET_POD_SPECS)
                })
            })?;
            let text = (text != "null").then_some(text);
            object_read = text.and(Some(read));
            once(&mut object, text)
        }
        "object" => once(&mut object, nullable(c)?),
        "oldObject" => once(&mut old_object, nullable(c)?),
        _ => c.skip_valid().map(drop),
    })?;
    let (group, kind) = kind?;
    Some(Head {
        group,
        kind,
        operation: operation.unwrap_or_default(),
        namespace: namespace.unwrap_or_default(),
        object: object.flatten(),
        old_object: old_object.flatten(),
        settings: None,
        object_read,
    })
}

type Kind<'a> = (Cow<'a, str>, Cow<'a, str>);

fn is_jobset(kind: &Option<Kind>) -> bool {
    kind.as_ref()
        .is_some_and(|(group, kind)| group == JOBSET_GROUP && kind == "JobSet")
}

/// The request's `kind`, when it is an object (serde also reads a list as one).
fn read_kind<'a>(c: &mut Cursor<'a>) -> Option<Kind<'a>> {
    let (mut group, mut kind) = (None, None);
    if c.next_byte()? != b'{' {
        return None;
    }
    c.object(|c, key| match key.plain()? {
        "group" => once(&mut group, string(c)?),
        "kind" => once(&mut kind, string(c)?),
        _ => c.skip_valid().map(drop),
    })?;
    Some((group.unwrap_or_default(), kind.unwrap_or_default()))
}

/// A string without an escape, borrowed as serde borrows it.
fn string<'a>(c: &mut Cursor<'a>) -> Option<Cow<'a, str>> {
    c.plain_string().map(Cow::Borrowed)
}

/// A value checked as JSON, as serde reads an `Option<&RawValue>`: `null` is none.
fn nullable<'a>(c: &mut Cursor<'a>) -> Option<Option<&'a str>> {
    let span = c.skip_valid()?;
    Some((!span.is_null(c.text())).then_some(span.of(c.text())?))
}

/// Sets a field met for the first time; `None` for the second, which serde refuses.
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(value);
            Some(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{by_serde, evaluate, fused, queue_lookup::HostCapabilities};
    use super::*;

    const REQUESTS: [&str; 5] = [
        include_str!("../../test_data/requests/jobset-tpu-4-slices.v09.json"),
        include_str!("../../test_data/requests/jobset-queue.json"),
        include_str!("../../test_data/requests/jobset-rule-t4-fail.json"),
        include_str!("../../test_data/requests/job-jax-gpu-4.json"),
        include_str!("../../test_data/requests/pod-tpu-slice-pod.json"),
    ];

    fn payload(request: &str, settings: &str) -> String {
        format!(r#"{{"request": {request}, "settings": {settings}}}"#)
    }

    /// The answer to `payload` whichever reads it, and whether the cursor did.
    fn same_answer(payload: &str) -> bool {
        let by_serde = by_serde(serde_json::from_str(payload), &HostCapabilities);
        assert_eq!(evaluate(payload.as_bytes()), by_serde, "{payload}");
        fused(payload, &HostCapabilities).is_some()
    }

    #[test]
    fn a_jobset_create_is_read_by_the_cursor_its_object_left_to_the_lean_read() {
        for (i, request) in REQUESTS.iter().enumerate() {
            let payload = payload(request, r#"{"role": "both"}"#);
            let head = read(&payload).unwrap();
            assert_eq!(head.settings, Some(r#"{"role": "both"}"#));
            assert_eq!(head.object_read.is_some(), i <= 2, "{request}");
            assert!(same_answer(&payload));
        }
    }

    /// Every byte of each payload deleted, or followed by one that breaks a string, a
    /// structure or a number: the same answer as serde's read, refusal or not, and the cursor
    /// reads some of them (a byte inside a value it passes over).
    #[test]
    fn a_broken_payload_gets_serde_s_answer() {
        let mut read_by_the_cursor = 0;
        for request in REQUESTS {
            let payload = payload(request, "{}");
            for at in (0..payload.len()).filter(|&at| payload.is_char_boundary(at)) {
                let (head, tail) = payload.split_at(at);
                let deleted = tail.chars().skip(1).collect::<String>();
                let mut variants = vec![format!("{head}{deleted}")];
                for extra in ["\"", "\\", "\u{1}", ",", "}", "0", "-", "e", " "] {
                    variants.push(format!("{head}{extra}{tail}"));
                }
                for variant in &variants {
                    read_by_the_cursor += usize::from(same_answer(variant));
                }
            }
        }
        assert!(read_by_the_cursor > 1000, "{read_by_the_cursor}");
    }

    #[test]
    fn what_serde_refuses_or_reads_otherwise_is_serde_s() {
        let jobset = REQUESTS[0];
        // The object before the kind: checked where it is met, as any object.
        let mut request: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(jobset).unwrap();
        let object = request.remove("object").unwrap();
        let rest = serde_json::to_string(&request).unwrap();
        let object_first = format!(r#"{{"object": {object}, {}"#, &rest[1..]);
        assert!(read(&payload(&object_first, "{}"))
            .unwrap()
            .object_read
            .is_none());
        let cases = [
            payload(jobset, "{}").replacen("\"kind\"", "\"k\\u0069nd\"", 1),
            format!(r#"{{"request": {jobset}, "request": {jobset}}}"#),
            format!(r#"{{"settings": null, "settings": {{}}, "request": {jobset}}}"#),
            format!(r#"{{"request": {jobset}}} x"#),
            format!(r#"{{"request": {object_first}}}"#),
            r#"{"request": {"kind": ["", "Pod"], "operation": "CREATE", "object": {}}}"#.into(),
            r#"{"request": {"kind": {"kind": "Pod"}, "operation": null, "object": {}}}"#.into(),
            r#"{"request": {"kind": {"kind": "Pod"}, "operation": "CREATE", "object": null}}"#
                .into(),
            r#"{"request": {"operation": "CREATE", "object": {}}}"#.into(),
            r#"{"settings": {}}"#.into(),
        ];
        let read_by_the_cursor = cases.iter().filter(|p| same_answer(p)).count();
        assert_eq!(read_by_the_cursor, 2);
    }
}

//! The walker against texts with every kind of value, and broken ones.
use super::*;

/// The whole text as one value, skipped: its span, when nothing but whitespace follows.
fn whole(text: &str) -> Option<Span> {
    let mut cursor = Cursor::new(text);
    let span = cursor.skip()?;
    cursor.at_end().then_some(span)
}

/// Every member, depth first, as `path = value`.
fn walk(cursor: &mut Cursor, path: &str, out: &mut Vec<String>) -> Option<()> {
    match cursor.next_byte()? {
        b'{' => {
            cursor.object(|c, key| walk(c, &format!("{path}.{}", key.unescaped()?), out))?;
        }
        b'[' => {
            cursor.array(|c, i| walk(c, &format!("{path}[{i}]"), out))?;
        }
        _ => {
            let span = cursor.skip()?;
            out.push(format!("{path} = {}", span.of(cursor.text())?));
        }
    }
    Some(())
}

#[test]
fn every_member_and_element_is_found_with_its_span() {
    let text = r#" { "a" : [1, {"b": "}\"]"}, [ ]], "k\u0065y": "x\\y", "n": null, "e": {} } "#;
    let mut found = Vec::new();
    walk(&mut Cursor::new(text), "", &mut found).unwrap();
    assert_eq!(
        found,
        [
            ".a[0] = 1",
            r#".a[1].b = "}\"]""#,
            r#".key = "x\\y""#,
            ".n = null"
        ]
    );
    let span = whole(text).unwrap();
    assert_eq!(span.of(text), Some(text.trim()));
}

#[test]
fn a_parse_reads_one_value_and_stops_after_it() {
    let parse_each = |text| {
        let mut values = Vec::new();
        Cursor::new(text).object(|c, _| {
            values.push(c.parse::<serde_json::Value>()?);
            Some(())
        })?;
        Some(serde_json::Value::Array(values))
    };
    let text = r#"{"a": 12, "b": [true, "x"], "c": null}"#;
    assert_eq!(
        parse_each(text),
        Some(serde_json::json!([12, [true, "x"], null]))
    );
    for broken in [r#"{"a": tru}"#, r#"{"a": "\q"}"#, r#"{"a": 1x}"#] {
        assert_eq!(parse_each(broken), None, "{broken}");
    }
}

#[test]
fn the_string_stop_is_the_first_quote_backslash_or_control_character_in_any_position() {
    for len in 0..20 {
        for at in 0..len {
            for byte in [b'"', b'\\', b'\n', 0, 0x1f] {
                let mut bytes = vec![b'a'; len];
                bytes[at] = byte;
                if at + 1 < len {
                    bytes[at + 1] = b'"';
                }
                assert_eq!(string_stop(&bytes, 0), Some(at), "{len} {at}");
            }
        }
        for byte in [b'\x7f', b' ', 0x80, 0xff] {
            assert_eq!(string_stop(&vec![byte; len], 0), None);
        }
    }
}

#[test]
fn broken_texts_give_none_and_never_panic() {
    // Skipping checks brackets and quotes only: the texts are JSON that serde has read.
    for text in ["", "{", "[1,", r#""open"#, "{} x", r#"{"a\"#, "]", "}"] {
        assert!(whole(text).is_none(), "{text:?}");
    }
    for text in [r#"{"a":}"#, "{,}", r#"{"a" 1}"#, "[1 2]", r#"{"a":1,}"#] {
        assert!(
            walk(&mut Cursor::new(text), "", &mut Vec::new()).is_none(),
            "{text:?}"
        );
    }
}

/// Steps order as their variants and values do (keys first, by their bytes; then indices),
/// whether two equal keys are the same literal or not.
#[test]
fn steps_order_keys_by_their_bytes_then_indices() {
    let (spec, other_spec) = ("spec", String::from("spec"));
    let steps = [
        PathStep::Key(spec),
        PathStep::Key(&other_spec),
        PathStep::Key("spe"),
        PathStep::Key("name"),
        PathStep::Key("spek"),
        PathStep::Key("template"),
        PathStep::Key(""),
        PathStep::Index(0),
        PathStep::Index(3),
    ];
    let model = |step: &PathStep| match *step {
        PathStep::Key(k) => (0, k.as_bytes().to_vec(), 0),
        PathStep::Index(i) => (1, Vec::new(), i),
    };
    for a in &steps {
        for b in &steps {
            assert_eq!(a.cmp(b), model(a).cmp(&model(b)), "{a:?} {b:?}");
            assert_eq!(a == b, model(a) == model(b), "{a:?} {b:?}");
        }
    }
}

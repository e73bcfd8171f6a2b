//! Kubernetes name syntax, as apimachinery's `util/validation` spells it: label values, DNS-1035
//! labels (JobSet's `groupName`), and qualified names (label keys, resource names).

/// Why the API server would refuse `value` as a label value (at most 63 characters,
/// `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`), for a warning that names a short value; `None`
/// when it takes it.
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() || name_part(value).is_ok() {
        None
    } else if value.chars().count() > 63 {
        Some("is longer than 63 characters".to_string())
    } else {
        Some(format!("{value:?} is not a valid label value"))
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, of any length: one label of a DNS-1123 name.
fn is_lowercase_label(s: &str) -> bool {
    let inner = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-';
    !s.is_empty() && !s.starts_with('-') && !s.ends_with('-') && s.bytes().all(inner)
}

/// RFC 1035 label: what JobSet requires of `groupName`, and what fits in a label value.
pub fn is_dns1035_label(s: &str) -> bool {
    s.len() <= 63 && s.starts_with(|c: char| c.is_ascii_lowercase()) && is_lowercase_label(s)
}

/// A DNS-1035 label close to `s`, to suggest in a fix.
pub fn dns1035_label_near(s: &str) -> String {
    let dashed: String = s
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let mut out = dashed.trim_start_matches(|c: char| !c.is_ascii_lowercase());
    // Only ASCII is left, so every byte is a character.
    out = out.get(..63).unwrap_or(out).trim_end_matches('-');
    let label = if out.is_empty() { "group-a" } else { out };
    label.to_string()
}

/// Kubernetes qualified name (label keys, resource names): `[prefix/]name`, where the prefix is a
/// DNS-1123 subdomain of at most 253 characters and the name at most 63 characters of
/// alphanumerics, `-`, `_` and `.`, starting and ending with an alphanumeric.
pub fn check_qualified_name(key: &str) -> Result<(), String> {
    let name = match key.split_once('/') {
        Some((prefix, name)) => {
            check_dns_subdomain(prefix)?;
            name
        }
        None => key,
    };
    name_part(name)
}

/// The name part of a qualified name, which is also a non-empty label value.
fn name_part(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 63 {
        return Err("the name part must have 1 to 63 characters".into());
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if !name.starts_with(alnum) || !name.ends_with(alnum) {
        return Err("the name part must start and end with a letter or digit".into());
    }
    let inner = |c: char| alnum(c) || matches!(c, '-' | '_' | '.');
    if !name.chars().all(inner) {
        return Err("the name part may only hold letters, digits, '-', '_' and '.'".into());
    }
    Ok(())
}

fn check_dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 253 {
        return Err("the prefix must have 1 to 253 characters".into());
    }
    let subdomain = s.split('.').all(is_lowercase_label);
    subdomain
        .then_some(())
        .ok_or_else(|| "the prefix must be a lowercase DNS subdomain".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[test]
    fn label_values_are_what_the_api_server_takes() {
        for ok in ["", "a", "Train_A.v2", "0", "a-b", &"x".repeat(63)] {
            assert_eq!(label_value_problem(ok), None, "{ok}");
        }
        for bad in ["train/eval", "-a", "a-", "a b", "é"] {
            let problem = format!("{bad:?} is not a valid label value");
            assert_eq!(label_value_problem(bad), Some(problem));
        }
        let long = Some("is longer than 63 characters".to_string());
        assert_eq!(label_value_problem(&"x".repeat(64)), long);
    }

    #[rstest]
    #[case("train", true)]
    #[case("a-1", true)]
    #[case("Train", false)]
    #[case("1st", false)]
    #[case("a_b", false)]
    #[case("end-", false)]
    #[case("", false)]
    #[case::longest("a".repeat(63), true)]
    #[case::too_long("a".repeat(64), false)]
    fn dns1035(#[case] s: String, #[case] ok: bool) {
        assert_eq!(is_dns1035_label(&s), ok);
        if !ok {
            let near = dns1035_label_near(&s);
            assert!(is_dns1035_label(&near), "{s} -> {near}");
        }
    }
}

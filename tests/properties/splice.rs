//! `mutate::splice` writes any tree that a mutation made from a text as that text with only the
//! written places rewritten: whatever the text's shape, spacing and escapes, the result reads
//! back as exactly the mutated tree. The mutations are those the policy makes: members added to
//! an object (or created along a path, or put where there was `null`), entries put first in a
//! list.
use jobset_multislice_policy::mutate::splice::{splice, Path, PathStep};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Quarters: floats that serde_json reads back exactly (the policy writes none).
        (-1_000_000i32..1_000_000).prop_map(|n| Value::from(f64::from(n) / 4.0)),
        "[a-z\"\\\\/é\u{1F600}\n\t ]{0,8}".prop_map(Value::String),
    ]
}

fn tree() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z\"é]{1,4}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// One mutation: which container it picks (by index, modulo), and what it adds.
#[derive(Debug, Clone)]
enum Op {
    AddMember(usize, String, Value),
    PutFirst(usize, Vec<Value>),
    Create(usize, Vec<String>, Value),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<usize>(), "[a-z\"é]{1,4}", scalar()).prop_map(|(i, k, v)| Op::AddMember(i, k, v)),
        (any::<usize>(), prop::collection::vec(scalar(), 1..3))
            .prop_map(|(i, v)| Op::PutFirst(i, v)),
        (
            any::<usize>(),
            prop::collection::vec("[a-z]{1,3}", 1..3),
            scalar()
        )
            .prop_map(|(i, p, v)| Op::Create(i, p, v)),
    ]
}

/// The paths of every object (or `null`) and every list in `value`.
fn places(
    value: &Value,
    path: &mut Vec<String>,
    objects: &mut Vec<Vec<String>>,
    lists: &mut Vec<Vec<String>>,
) {
    match value {
        Value::Object(m) => {
            objects.push(path.clone());
            for (k, v) in m {
                path.push(k.clone());
                places(v, path, objects, lists);
                path.pop();
            }
        }
        Value::Array(a) => {
            lists.push(path.clone());
            for (i, v) in a.iter().enumerate() {
                path.push(i.to_string());
                places(v, path, objects, lists);
                path.pop();
            }
        }
        Value::Null => objects.push(path.clone()),
        _ => {}
    }
}

fn at<'v>(value: &'v mut Value, path: &[String]) -> &'v mut Value {
    path.iter().fold(value, |v, step| match v {
        Value::Array(a) => &mut a[step.parse::<usize>().unwrap()],
        other => &mut other[step.as_str()],
    })
}

/// Applies `op` as the policy's mutations do; where it wrote.
fn apply(tree: &mut Value, op: &Op) -> Option<Vec<String>> {
    let (mut objects, mut lists) = (Vec::new(), Vec::new());
    places(tree, &mut Vec::new(), &mut objects, &mut lists);
    let pick =
        |all: &[Vec<String>], i: usize| (!all.is_empty()).then(|| all[i % all.len()].clone());
    let (i, keys, value) = match op {
        Op::PutFirst(i, values) => {
            let path = pick(&lists, *i)?;
            if let Value::Array(list) = at(tree, &path) {
                list.splice(0..0, values.iter().cloned());
            }
            return Some(path);
        }
        Op::AddMember(i, key, value) => (i, vec![key.clone()], value),
        Op::Create(i, keys, value) => (i, keys.clone(), value),
    };
    // Down the keys from an object (or `null`, made an object), creating objects where there
    // is nothing or `null`, as `mutate::object_at` does; the last key gets the value unless
    // it holds an object or a list (the policy never replaces one).
    let path = pick(&objects, *i)?;
    let mut changed = tree.clone();
    let mut place = at(&mut changed, &path);
    for (n, key) in keys.iter().enumerate() {
        if place.is_null() {
            *place = Value::Object(Map::new());
        }
        let slot = place
            .as_object_mut()?
            .entry(key.clone())
            .or_insert(Value::Null);
        if n + 1 == keys.len() {
            if slot.is_object() || slot.is_array() {
                return None;
            }
            *slot = value.clone();
        }
        place = slot;
    }
    *tree = changed;
    // A member added is written under its object (as pod labels are); a path created, under
    // its first key, which the text may lack (as a pod's absent labels are).
    match op {
        Op::Create(..) => Some(path.into_iter().chain(keys.into_iter().take(1)).collect()),
        _ => Some(path),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_splice_reads_back_as_the_mutated_tree(
        original in tree().prop_filter("an object", Value::is_object),
        ops in prop::collection::vec(op(), 0..4),
        pretty in any::<bool>(),
    ) {
        let text = if pretty {
            serde_json::to_string_pretty(&original).unwrap()
        } else {
            serde_json::to_string(&original).unwrap()
        };
        let mut mutated = original.clone();
        let mut written: Vec<Vec<String>> = Vec::new();
        for op in &ops {
            if let Some(path) = apply(&mut mutated, op) {
                written.push(path);
            }
        }
        // A list's elements by number: the generated keys have no digits.
        let typed: Vec<Path> = written
            .iter()
            .map(|p| {
                p.iter()
                    .map(|s| s.parse().map_or(PathStep::Key(s.as_str()), PathStep::Index))
                    .collect()
            })
            .collect();
        let out = splice(&text, &mutated, &typed, &[]).expect("a JSON text");
        let read: Value = serde_json::from_slice(&out).expect("valid JSON");
        prop_assert_eq!(read, mutated);
        if written.is_empty() {
            prop_assert_eq!(out, text.trim().as_bytes());
        }
    }
}

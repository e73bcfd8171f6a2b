//! Containers of a pod spec, and the TPU chips they ask for (SPEC §3). Shared by the JobSet view
//! (pod templates) and pod admission.
use crate::error::InputError;
use crate::json::{self, field, join, Object};
use crate::paths::SpecAt;
use crate::quantity;
use crate::views::container_env::{self, EnvEntry, UserEntry};
use serde_json::Value;
use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerView<'a> {
    /// `initContainers` or `containers`.
    pub list: &'static str,
    pub index: usize,
    /// The pod spec it is in, for messages.
    pub spec: SpecAt,
    pub name: &'a str,
    /// Its own `env` entries; a value that is not a list is kept as its error, reported only
    /// where the env is needed.
    pub env: Result<Vec<EnvEntry<'a>>, InputError>,
    /// TPU chips: the limit where given, else the request. A quantity that does not parse is
    /// kept as its error, for rule T4 to report; the container still counts as a TPU one.
    pub tpu_chips: Result<u32, InputError>,
}

impl<'a> ContainerView<'a> {
    /// A container named "c" at `list[index]` with `chips` TPU chips, for unit tests.
    #[cfg(test)]
    pub fn for_test(list: &'static str, index: usize, chips: u32) -> ContainerView<'static> {
        ContainerView {
            list,
            index,
            spec: SpecAt::Pod,
            name: "c",
            env: Ok(Vec::new()),
            tpu_chips: Ok(chips),
        }
    }

    pub fn is_tpu(&self) -> bool {
        !matches!(self.tpu_chips, Ok(0))
    }

    pub fn user_entries(&self) -> Result<Vec<UserEntry<'a>>, InputError> {
        container_env::user_entries(&self.env)
    }

    /// Whether an entry names one of `names`, as written.
    pub fn names_any(&self, names: &[&str]) -> bool {
        let env = self.env.as_deref().unwrap_or_default();
        env.iter()
            .any(|e| e.name.is_some_and(|n| names.contains(&n)))
    }

    /// `<spec>.<list>[<index>]`, for messages.
    pub fn path(&self) -> String {
        self.spec.container(self.list, self.index)
    }
}

pub fn containers<'a>(
    spec: &'a Object,
    at: SpecAt,
    tpu_resource: &str,
) -> Result<Vec<ContainerView<'a>>, InputError> {
    let mut out = Vec::new();
    // Init containers first: the kubelet starts them first, and the warnings list them first.
    for list in ["initContainers", "containers"] {
        let items = json::opt_array(spec, list, &at.path())?.map_or(&[][..], Vec::as_slice);
        for (index, item) in items.iter().enumerate() {
            let c_path = at.container(list, index);
            let c = json::as_object(item, &c_path)?;
            out.push(ContainerView {
                list,
                index,
                spec: at,
                name: json::opt_str(c, "name", &c_path)?.unwrap_or(""),
                tpu_chips: tpu_chips(c, &c_path, tpu_resource)?,
                env: container_env::env_entries(c, &c_path),
            });
        }
    }
    Ok(out)
}

/// Chips per pod: the sum over regular containers whose quantity parses. Init containers run
/// before them and release their chips, so they do not add to what the pod holds.
pub fn chips_per_pod(containers: &[ContainerView], at: SpecAt) -> Result<u32, InputError> {
    let path = at.field("containers");
    containers
        .iter()
        .filter(|c| c.list == "containers")
        .filter_map(|c| c.tpu_chips.as_ref().ok())
        .try_fold(0u32, |sum, chips| crate::error::add_at(sum, *chips, &path))
}

/// The chips a container asks for. The outer error is a malformed `resources` (bad input);
/// the inner one a quantity that does not parse, kept for rule T4 to report.
fn tpu_chips(
    container: &Object,
    path: &str,
    resource: &str,
) -> Result<Result<u32, InputError>, InputError> {
    let Some(resources) = json::opt_object(container, "resources", path)? else {
        return Ok(Ok(0));
    };
    let r_path = join(path, "resources");
    // A limit counts where both are given: Kubernetes requires them equal for extended resources.
    for kind in ["limits", "requests"] {
        let Some(map) = json::opt_object(resources, kind, &r_path)? else {
            continue;
        };
        if let Some(q) = field(map, resource) {
            let q_path = format!("{}[{resource:?}]", join(&r_path, kind));
            return Ok(quantity_value(q, &q_path));
        }
    }
    Ok(Ok(0))
}

/// CRDs carry quantities as int-or-string, so a number is as valid as `"4"`.
fn quantity_value(v: &Value, path: &str) -> Result<u32, InputError> {
    let text = match v {
        Value::String(s) => Cow::Borrowed(s.as_str()),
        Value::Number(n) => Cow::Owned(n.to_string()),
        other => return Err(json::wrong(path, "a quantity", other)),
    };
    quantity::parse_whole(&text).map_err(|e| InputError::invalid(path, format!("{text:?} {e}")))
}

/// The pod's TPU containers numbered k = 0..n-1 (SPEC §3), as indexes into `containers`: the
/// regular containers in spec order, then the init containers in spec order (LeaderWorkerSet's
/// order, so that worker ids and ports agree with what its TPU webhook gives).
pub fn tpu_order(containers: &[ContainerView]) -> Vec<usize> {
    let of = |list: &'static str| {
        containers
            .iter()
            .enumerate()
            .filter(move |(_, c)| c.list == list && c.is_tpu())
            .map(|(i, _)| i)
    };
    of("containers").chain(of("initContainers")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[test]
    fn regular_containers_come_before_init_containers() {
        // The view lists init containers first; TPU numbering puts them last.
        let c = ContainerView::for_test;
        let cs = [
            c("initContainers", 0, 4),
            c("initContainers", 1, 0),
            c("containers", 0, 0),
            c("containers", 1, 2),
            c("containers", 2, 2),
        ];
        assert_eq!(tpu_order(&cs), vec![3, 4, 0]);
    }

    #[rstest]
    #[case::limit_wins_over_request_and_numbers_count(
        json!({
            "initContainers": [{"name": "i", "resources": {"requests": {"google.com/tpu": "1"}}}],
            "containers": [
                {"name": "a", "resources": {"limits": {"google.com/tpu": 4}, "requests": {"google.com/tpu": "2"}}},
                {"name": "b", "resources": {"limits": {"cpu": "1"}}},
                {"name": "c"}
            ]
        }),
        Ok(vec![1, 4, 0, 0])
    )]
    #[case::bad_quantity_names_the_field(
        json!({"containers": [{"name": "a", "resources": {"limits": {"google.com/tpu": "-4"}}}]}),
        Err("spec.containers[0].resources.limits[\"google.com/tpu\"]: \"-4\" is negative")
    )]
    fn chips_of_each_container(#[case] spec: Value, #[case] want: Result<Vec<u32>, &str>) {
        let cs = containers(spec.as_object().unwrap(), SpecAt::Pod, "google.com/tpu").unwrap();
        let got: Result<Vec<u32>, _> = cs.iter().map(|c| c.tpu_chips.clone()).collect();
        assert_eq!(got.map_err(|e| e.to_string()), want.map_err(str::to_string));
    }
}

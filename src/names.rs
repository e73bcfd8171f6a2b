//! The names the JobSet and Job controllers generate (docs/contributing/spec.md §2), in one place. Job `j` of
//! replicated job `r` is `<jobset>-<r>-<j>`; its pod with completion index `c` has the
//! hostname `<job>-<c>`; the headless Service named by the subdomain makes
//! `<hostname>.<subdomain>` resolve. The facts store a pod as `<r>-<j>-<c>`, without the JobSet
//! name, which a JobSet created with `generateName` does not know yet.

/// `<rjob>-<jobIndex>-<podIndex>`: a JobSet's pod, without the JobSet's name.
pub fn rjob_pod(rjob: &str, job_index: u32, pod_index: u32) -> String {
    format!("{rjob}-{job_index}-{pod_index}")
}

/// `<jobset>-<name>`: a Job or pod name of the JobSet.
pub fn in_jobset(jobset: &str, name: &str) -> String {
    format!("{jobset}-{name}")
}

/// `<jobset>-<rjob>-<jobIndex>`: the Job the JobSet controller makes.
pub fn job(jobset: &str, rjob: &str, job_index: u32) -> String {
    format!("{jobset}-{rjob}-{job_index}")
}

/// `<job>-<completionIndex>`: the hostname the Job controller gives an Indexed Job's pod.
pub fn hostname(job: &str, completion_index: u32) -> String {
    format!("{job}-{completion_index}")
}

/// `<hostname>.<subdomain>`: how a pod is reached through the headless Service.
pub fn address(hostname: &str, subdomain: &str) -> String {
    format!("{hostname}.{subdomain}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobset_pod_is_named_as_the_controllers_name_it() {
        let job = job("js", "workers", 2);
        assert_eq!(job, "js-workers-2");
        assert_eq!(address(&hostname(&job, 3), "sub"), "js-workers-2-3.sub");
        assert_eq!(
            address(&in_jobset("js", &rjob_pod("workers", 2, 3)), "sub"),
            "js-workers-2-3.sub"
        );
    }
}

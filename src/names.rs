//! The names the JobSet and Job controllers generate (SPEC §2), in one place. Job `j` of replicated
//! job `r` is `<jobset>-<r>-<j>`; its pod with completion index `c` has the hostname `<job>-<c>`;
//! the headless Service named by the subdomain makes `<hostname>.<subdomain>` resolve. The facts
//! store a pod as `<r>-<j>-<c>`, without the JobSet name, which a JobSet created with
//! `generateName` does not know yet.

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

/// Whether `address` is `<jobset>-<rjob>-<n>-<n>.<subdomain>` with decimal `n`: a pod of that
/// replicated job, as JobSet's coordinator annotation names one. A replicated job whose name
/// merely starts with `<rjob>-` (`w-head` beside `w`) is another one.
pub fn is_pod_of(address: &str, jobset: &str, rjob: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    address
        .strip_prefix(jobset)
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| r.strip_prefix(rjob))
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| r.split_once('.'))
        .and_then(|(host, _subdomain)| host.split_once('-'))
        .is_some_and(|(job, pod)| digits(job) && digits(pod))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::the_first_pod("js-w-0-0.js", true)]
    #[case::a_dotted_subdomain("js-w-12-3.sub.ns.svc", true)]
    #[case::a_replicated_job_named_w_dash_something("js-w-head-0-0.js", false)]
    #[case::three_numbers("js-w-1-0-0.js", false)]
    #[case::a_pod_index_that_is_no_number("js-w-0-x.js", false)]
    #[case::no_subdomain("js-w-0-0", false)]
    #[case::one_number("js-w-0.js", false)]
    #[case::another_replicated_job("js-x-0-0.js", false)]
    #[case::an_empty_job_index("js-w--0.js", false)]
    fn a_pod_of_a_replicated_job_is_named_exactly(#[case] address: &str, #[case] is: bool) {
        assert_eq!(is_pod_of(address, "js", "w"), is);
    }

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

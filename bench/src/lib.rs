//! What `make bench` and its tests share: the requests, built from the fixtures, and the
//! responses a module gives them, as a host reads them.
pub mod floor;
pub mod host_work;
pub mod responses;
pub mod server_floor;
pub mod server_memory;
pub mod workloads;

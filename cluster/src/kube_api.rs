//! The test's side of the API: kube-rs against the control plane, with what tests need beyond
//! a typed client: server-side apply of any manifest (discovery finds its resource), and a
//! CREATE whose `Warning` headers and refusal message come back as they reach `kubectl`.
use anyhow::{anyhow, bail, Context, Result};
use http_body_util::BodyExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{pinned_kind, Scope};
use kube::{Client, Config};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

pub const FIELD_MANAGER: &str = "jobset-multislice-cluster-test";

#[derive(Clone)]
pub struct Cluster {
    pub client: Client,
}

/// The answer to a CREATE: HTTP status, body (the object or a Status), and the warnings.
#[derive(Debug, Clone)]
pub struct Created {
    pub status: u16,
    pub body: Value,
    pub warnings: Vec<String>,
}

impl Created {
    /// The refusal's message, as `kubectl` prints it after "Error from server".
    pub fn message(&self) -> Option<&str> {
        (self.status >= 300)
            .then(|| self.body["message"].as_str())
            .flatten()
    }
}

impl Cluster {
    pub async fn connect(kubeconfig: &Path) -> Result<Cluster> {
        let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
        let mut config =
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        config.read_timeout = Some(Duration::from_secs(60));
        Ok(Cluster {
            client: Client::try_from(config)?,
        })
    }

    /// The resource of a manifest's apiVersion and kind, and whether it is namespaced.
    pub async fn resource(&self, object: &Value) -> Result<(ApiResource, bool)> {
        let api_version = object["apiVersion"]
            .as_str()
            .ok_or_else(|| anyhow!("no apiVersion"))?;
        let kind = object["kind"].as_str().ok_or_else(|| anyhow!("no kind"))?;
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) = pinned_kind(&self.client, &gvk)
            .await
            .with_context(|| format!("no resource for {api_version} {kind}"))?;
        Ok((resource, capabilities.scope == Scope::Namespaced))
    }

    fn api(&self, resource: &ApiResource, namespaced: bool, namespace: &str) -> Api<DynamicObject> {
        if namespaced {
            Api::namespaced_with(self.client.clone(), namespace, resource)
        } else {
            Api::all_with(self.client.clone(), resource)
        }
    }

    /// The API of an object's resource in its namespace, and its name.
    async fn object_api(&self, object: &Value) -> Result<(Api<DynamicObject>, String)> {
        let (resource, namespaced) = self.resource(object).await?;
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        Ok((self.api(&resource, namespaced, namespace), name.to_string()))
    }

    /// Server-side apply (large CRDs do not fit a client-side apply's annotation).
    pub async fn apply(&self, object: &Value) -> Result<Value> {
        let (resource, namespaced) = self.resource(object).await?;
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        let name = object["metadata"]["name"]
            .as_str()
            .ok_or_else(|| anyhow!("apply needs a name"))?;
        let applied = self
            .api(&resource, namespaced, namespace)
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(object),
            )
            .await
            .with_context(|| format!("apply {} {name}", resource.kind))?;
        Ok(serde_json::to_value(applied)?)
    }

    pub async fn apply_yaml_file(&self, path: &Path) -> Result<()> {
        let text = std::fs::read_to_string(path)?;
        for doc in multislice_host::preview::yaml_documents(&text)? {
            if doc.is_object() {
                self.apply(&doc).await?;
            }
        }
        Ok(())
    }

    /// A CREATE as `kubectl create` sends it; a refusal is an answer, not an error.
    pub async fn create(&self, object: &Value, dry_run: bool) -> Result<Created> {
        let (resource, namespaced) = self.resource(object).await?;
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        let mut url = if namespaced {
            format!(
                "{}/namespaces/{namespace}/{}",
                base(&resource),
                resource.plural
            )
        } else {
            format!("{}/{}", base(&resource), resource.plural)
        };
        if dry_run {
            url.push_str("?dryRun=All");
        }
        let request = http::Request::post(url)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(object)?)?;
        let response = self.client.send(request.map(Into::into)).await?;
        let status = response.status().as_u16();
        let warnings = response
            .headers()
            .get_all("warning")
            .iter()
            // UTF-8, not visible ASCII only (`to_str`): the API server passes a warning's text
            // on as the webhook gave it, such as the … of a warning cut at 256 characters.
            .filter_map(|v| std::str::from_utf8(v.as_bytes()).ok())
            .map(warning_text)
            .collect();
        let bytes = response.into_body().collect().await?.to_bytes();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Created {
            status,
            body,
            warnings,
        })
    }

    pub async fn get_raw(&self, path: &str) -> Result<String> {
        let request = http::Request::get(path).body(Vec::new())?;
        Ok(self.client.request_text(request).await?)
    }

    /// Every object of a kind in a namespace (all namespaces when `None`).
    pub async fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        labels: Option<&str>,
    ) -> Result<Vec<Value>> {
        let probe = serde_json::json!({"apiVersion": api_version, "kind": kind});
        let (resource, namespaced) = self.resource(&probe).await?;
        let api: Api<DynamicObject> = match namespace {
            Some(ns) if namespaced => Api::namespaced_with(self.client.clone(), ns, &resource),
            _ => Api::all_with(self.client.clone(), &resource),
        };
        let mut params = ListParams::default();
        if let Some(l) = labels {
            params = params.labels(l);
        }
        let list = api.list(&params).await?;
        let mut out = Vec::new();
        for item in list.items {
            let mut v = serde_json::to_value(item)?;
            v["apiVersion"] = api_version.into();
            v["kind"] = kind.into();
            out.push(v);
        }
        Ok(out)
    }

    pub async fn get(&self, object: &Value) -> Result<Option<Value>> {
        let (api, name) = self.object_api(object).await?;
        let found = api.get_opt(&name).await?;
        Ok(found.map(serde_json::to_value).transpose()?)
    }

    pub async fn delete(&self, object: &Value) -> Result<()> {
        let (api, name) = self.object_api(object).await?;
        gone_is_fine(api.delete(&name, &DeleteParams::foreground()).await)
    }

    /// Removes a terminating object at once, as a kubelet does once its containers stopped.
    pub async fn delete_now(&self, object: &Value) -> Result<()> {
        let (api, name) = self.object_api(object).await?;
        let mut params = DeleteParams::default().grace_period(0);
        params.preconditions =
            object["metadata"]["uid"]
                .as_str()
                .map(|uid| kube::api::Preconditions {
                    uid: Some(uid.to_string()),
                    resource_version: None,
                });
        // 409: the uid precondition failed, a new object of that name: not ours to remove.
        gone_is_fine(api.delete(&name, &params).await)
    }

    /// A merge patch to an object's status subresource.
    pub async fn patch_status(&self, object: &Value, status: &Value) -> Result<()> {
        let (api, name) = self.object_api(object).await?;
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": status})),
        )
        .await?;
        Ok(())
    }

    /// A merge patch to an object.
    pub async fn patch_merge(&self, object: &Value, patch: &Value) -> Result<()> {
        let (api, name) = self.object_api(object).await?;
        api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(())
    }

    pub async fn wait_crd_established(&self, name: &str) -> Result<()> {
        let probe = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(crd) = self.get(&probe).await? {
                let established = crd["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Established" && c["status"] == "True");
                if established {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!("CRD {name} not established within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A delete whose object is already gone (404) or replaced (409) has nothing left to do.
fn gone_is_fine<T>(result: kube::Result<T>) -> Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn base(resource: &ApiResource) -> String {
    if resource.group.is_empty() {
        format!("/api/{}", resource.version)
    } else {
        format!("/apis/{}/{}", resource.group, resource.version)
    }
}

/// `299 - "text"` (RFC 7234 warn-text, as the API server writes it) -> `text`.
pub fn warning_text(header: &str) -> String {
    let text = header
        .splitn(3, ' ')
        .nth(2)
        .unwrap_or(header)
        .trim()
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(header);
    text.replace("\\\"", "\"").replace("\\\\", "\\")
}

//! One CA for the whole control plane, made at start with Debian's `openssl`: a serving
//! certificate for 127.0.0.1 (the API server, our webhook and JobSet's webhook server all
//! listen there; Kueue's rotator makes its own), an admin client certificate in `system:masters`, and the service-account
//! signing key the API server requires.
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Pki {
    pub dir: PathBuf,
}

impl Pki {
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }
    pub fn serving_cert(&self) -> PathBuf {
        self.dir.join("serving.crt")
    }
    pub fn serving_key(&self) -> PathBuf {
        self.dir.join("serving.key")
    }
    pub fn admin_cert(&self) -> PathBuf {
        self.dir.join("admin.crt")
    }
    pub fn admin_key(&self) -> PathBuf {
        self.dir.join("admin.key")
    }
    pub fn sa_key(&self) -> PathBuf {
        self.dir.join("sa.key")
    }
    pub fn sa_pub(&self) -> PathBuf {
        self.dir.join("sa.pub")
    }
    /// A folder holding the serving pair as controller-runtime wants it (`tls.crt`, `tls.key`).
    pub fn cert_dir(&self) -> PathBuf {
        self.dir.join("serving")
    }
    pub fn ca_bundle_base64(&self) -> Result<String> {
        use base64::Engine as _;
        Ok(base64::engine::general_purpose::STANDARD.encode(std::fs::read(self.ca_cert())?))
    }

    /// A client certificate of this CA for `subject` (`/CN=<user>[/O=<group>]`), made once as
    /// `<name>.crt` and `<name>.key`: an identity of its own, distinct from `admin`.
    pub fn client(&self, name: &str, subject: &str) -> Result<(PathBuf, PathBuf)> {
        let (crt, key) = (
            self.dir.join(format!("{name}.crt")),
            self.dir.join(format!("{name}.key")),
        );
        if !crt.is_file() {
            signed(&self.dir, name, subject, "client.ext")?;
        }
        Ok((crt, key))
    }

    /// Makes every key and certificate in `dir`.
    pub fn create(dir: &Path) -> Result<Pki> {
        std::fs::create_dir_all(dir)?;
        let pki = Pki {
            dir: dir.to_path_buf(),
        };
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                "/CN=jobset-multislice-test-ca",
            ],
        )?;
        std::fs::write(
            dir.join("serving.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
        )?;
        std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n")?;
        signed(dir, "serving", "/CN=127.0.0.1", "serving.ext")?;
        signed(dir, "admin", "/O=system:masters/CN=admin", "client.ext")?;
        openssl(dir, &["genrsa", "-out", "sa.key", "2048"])?;
        openssl(dir, &["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"])?;
        let certs = pki.cert_dir();
        std::fs::create_dir_all(&certs)?;
        std::fs::copy(pki.serving_cert(), certs.join("tls.crt"))?;
        std::fs::copy(pki.serving_key(), certs.join("tls.key"))?;
        Ok(pki)
    }
}

/// `<name>.key` and `<name>.crt`, signed by the CA.
fn signed(dir: &Path, name: &str, subject: &str, ext: &str) -> Result<()> {
    let (key, csr, crt) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
    );
    openssl(
        dir,
        &[
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", subject,
        ],
    )?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
            "-extfile",
            ext,
        ],
    )
}

pub(crate) fn openssl(dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .context("cannot run openssl (Debian's openssl package)")?;
    if !out.status.success() {
        bail!(
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

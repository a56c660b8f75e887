//! Certificates for the TLS tests, made with the `openssl` CLI (and `keytool` for Java's
//! stores) in a directory of the test's own.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The password of every store made here (kazoo's harness uses the same).
pub const PASSWORD: &str = "apassword";

pub struct Pki {
    pub dir: PathBuf,
    /// The directory [`Pki::scratch`] made, removed with the `Pki`.
    _scratch: Option<tempfile::TempDir>,
}

pub fn run(cmd: &mut Command) {
    let out = cmd.output().expect("running a certificate tool");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn openssl(dir: &Path, args: &[&str]) {
    run(Command::new("openssl").current_dir(dir).args(args));
}

impl Pki {
    /// A directory for certificates, none made yet.
    pub fn empty(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        Pki {
            dir: dir.to_path_buf(),
            _scratch: None,
        }
    }

    /// A new temporary directory `warden-<label>-…` for certificates, removed when the `Pki`
    /// is dropped.
    pub fn scratch(label: &str) -> Pki {
        let scratch = super::servers::scratch_dir(label);
        Pki {
            dir: scratch.path().to_path_buf(),
            _scratch: Some(scratch),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn ca(&self, name: &str, cn: &str) {
        openssl(
            &self.dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.pem"),
                "-days",
                "30",
                "-subj",
                &format!("/CN={cn}"),
            ],
        );
    }

    /// `name.key` (PKCS#8), `name.pem`, and `name-bundle.pem` (key and chain in one file,
    /// ZooKeeper's PEM key store).
    pub fn leaf(&self, name: &str, ca: &str, subject: &str, ext: Option<&str>, days: &str) {
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-utf8",
                "-multivalue-rdn",
                "-subj",
                subject,
            ],
        );
        let mut args: Vec<String> = [
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            &format!("{name}.pem"),
            "-days",
            days,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(ext) = ext {
            args.extend(["-extfile".to_string(), ext.to_string()]);
        }
        run(Command::new("openssl").current_dir(&self.dir).args(&args));
        let key = std::fs::read_to_string(self.path(&format!("{name}.key"))).unwrap();
        let cert = std::fs::read_to_string(self.path(&format!("{name}.pem"))).unwrap();
        std::fs::write(self.path(&format!("{name}-bundle.pem")), key + &cert).unwrap();
    }

    /// `name.p12`: the key and certificate as a PKCS#12 store.
    pub fn pkcs12(&self, name: &str) -> PathBuf {
        openssl(
            &self.dir,
            &[
                "pkcs12",
                "-export",
                "-inkey",
                &format!("{name}.key"),
                "-in",
                &format!("{name}.pem"),
                "-out",
                &format!("{name}.p12"),
                "-passout",
                &format!("pass:{PASSWORD}"),
            ],
        );
        self.path(&format!("{name}.p12"))
    }

    /// `name.jks`: the PKCS#12 store converted by keytool into a JKS one.
    pub fn jks_key(&self, name: &str) -> PathBuf {
        let p12 = self.pkcs12(name);
        let jks = self.path(&format!("{name}.jks"));
        let _ = std::fs::remove_file(&jks);
        run(Command::new("keytool").args([
            "-importkeystore",
            "-noprompt",
            "-srckeystore",
            p12.to_str().unwrap(),
            "-srcstoretype",
            "PKCS12",
            "-srcstorepass",
            PASSWORD,
            "-destkeystore",
            jks.to_str().unwrap(),
            "-deststoretype",
            "JKS",
            "-deststorepass",
            PASSWORD,
        ]));
        jks
    }

    /// A trust store holding the CA `ca`, of keytool type `kind` (`JKS`, `PKCS12`).
    pub fn trust(&self, ca: &str, kind: &str, ext: &str) -> PathBuf {
        let store = self.path(&format!("{ca}-trust.{ext}"));
        let _ = std::fs::remove_file(&store);
        run(Command::new("keytool").args([
            "-importcert",
            "-noprompt",
            "-alias",
            "ca",
            "-file",
            self.path(&format!("{ca}.pem")).to_str().unwrap(),
            "-keystore",
            store.to_str().unwrap(),
            "-storetype",
            kind,
            "-storepass",
            PASSWORD,
        ]));
        store
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap()
    }
}

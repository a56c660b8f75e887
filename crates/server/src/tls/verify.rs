//! Client certificates checked as the JDK checks them, which differs from webpki in one way
//! that matters: X.509 version 1 certificates. kazoo's test harness (and old private CAs)
//! issue v1 end-entity certificates, which ZooKeeper accepts and webpki refuses to parse. A
//! v3 certificate goes through webpki (`WebPkiClientVerifier`) unchanged; a v1 (or v2) one is
//! checked here: within its validity period, its signature by a trust store certificate,
//! directly or through the intermediates the client sent, each of them valid too.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};
use x509_parser::prelude::{ASN1Time, FromDer, X509Certificate, X509Version};

/// How many certificates a v1 chain may have above its leaf before a trust anchor.
const CHAIN_DEPTH_MAX: usize = 5;

#[derive(Debug)]
pub struct ClientVerifier {
    webpki: Arc<dyn ClientCertVerifier>,
    anchors: Vec<CertificateDer<'static>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientVerifier {
    pub fn new(
        webpki: Arc<dyn ClientCertVerifier>,
        anchors: Vec<CertificateDer<'static>>,
        algorithms: WebPkiSupportedAlgorithms,
    ) -> ClientVerifier {
        ClientVerifier {
            webpki,
            anchors,
            algorithms,
        }
    }
}

fn parse<'a>(der: &'a CertificateDer<'_>) -> Result<X509Certificate<'a>, Error> {
    X509Certificate::from_der(der.as_ref())
        .map(|(_, cert)| cert)
        .map_err(|_| Error::InvalidCertificate(CertificateError::BadEncoding))
}

/// Whether webpki can take the certificate: only v3 ones.
fn is_v3(der: &CertificateDer<'_>) -> bool {
    parse(der).is_ok_and(|c| c.version() == X509Version::V3)
}

fn check_validity(cert: &X509Certificate<'_>, now: UnixTime) -> Result<(), Error> {
    let now = ASN1Time::from_timestamp(now.as_secs() as i64)
        .map_err(|_| Error::General("the clock is out of range".into()))?;
    let validity = cert.validity();
    if now < validity.not_before {
        return Err(Error::InvalidCertificate(CertificateError::NotValidYet));
    }
    if now > validity.not_after {
        return Err(Error::InvalidCertificate(CertificateError::Expired));
    }
    Ok(())
}

impl ClientVerifier {
    /// A v1/v2 leaf: valid now and signed by an anchor, or by an intermediate that is.
    fn verify_legacy(
        &self,
        leaf: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<(), Error> {
        let anchors: Vec<X509Certificate<'_>> =
            self.anchors.iter().filter_map(|a| parse(a).ok()).collect();
        let intermediates: Vec<X509Certificate<'_>> =
            intermediates.iter().filter_map(|c| parse(c).ok()).collect();
        let mut cert = parse(leaf)?;
        for _ in 0..=CHAIN_DEPTH_MAX {
            check_validity(&cert, now)?;
            let signed_by = |issuer: &X509Certificate<'_>| {
                issuer.subject().as_raw() == cert.issuer().as_raw()
                    && cert.verify_signature(Some(issuer.public_key())).is_ok()
            };
            if anchors.iter().any(signed_by) {
                return Ok(());
            }
            match intermediates.iter().find(|c| signed_by(c)) {
                Some(next) => cert = next.clone(),
                None => return Err(Error::InvalidCertificate(CertificateError::UnknownIssuer)),
            }
        }
        Err(Error::InvalidCertificate(CertificateError::UnknownIssuer))
    }

    /// A handshake signature made with a v1 certificate's key, which webpki cannot take
    /// out of the certificate: the key's algorithms for `scheme`, tried in turn.
    fn verify_with_legacy_key(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let parsed = parse(cert)?;
        let key = parsed.public_key().subject_public_key.data.as_ref();
        let algorithms = self
            .algorithms
            .mapping
            .iter()
            .find(|(scheme, _)| *scheme == dss.scheme)
            .map(|(_, algs)| *algs)
            .ok_or(Error::PeerMisbehaved(
                rustls::PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
            ))?;
        if algorithms
            .iter()
            .any(|alg| alg.verify_signature(key, message, dss.signature()).is_ok())
        {
            Ok(HandshakeSignatureValid::assertion())
        } else {
            Err(Error::InvalidCertificate(CertificateError::BadSignature))
        }
    }
}

impl ClientCertVerifier for ClientVerifier {
    fn offer_client_auth(&self) -> bool {
        self.webpki.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.webpki.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        if is_v3(end_entity) {
            self.webpki
                .verify_client_cert(end_entity, intermediates, now)
        } else {
            self.verify_legacy(end_entity, intermediates, now)
                .map(|()| ClientCertVerified::assertion())
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        if is_v3(cert) {
            rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
        } else {
            self.verify_with_legacy_key(message, cert, dss)
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        if is_v3(cert) {
            rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
        } else {
            // rustls has already refused a scheme TLS 1.3 does not allow.
            self.verify_with_legacy_key(message, cert, dss)
        }
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

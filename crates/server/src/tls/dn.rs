//! A certificate subject written as Java's `X500Principal.getName()` writes it (RFC 2253), the
//! form ZooKeeper's `X509AuthenticationProvider` gives a client as its `x509` id: the RDNs
//! last first, joined by `,`; the values of a multi-valued RDN joined by `+`; the RFC's own
//! keywords (CN, L, ST, O, OU, C, STREET, DC, UID) by name, every other attribute as its
//! dotted OID with `#` and the hex of the value's DER; `,=+<>#;"\` escaped with `\`, as are
//! leading and trailing spaces.

use x509_parser::der_parser::asn1_rs::{Tag, ToDer};
use x509_parser::prelude::{AttributeTypeAndValue, X509Name};

/// The RFC 2253 keywords and their OIDs (RFC 2253 §2.3; Java's `AVAKeyword` for RFC 2253).
const KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.6", "C"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// The subject or issuer `name` in RFC 2253 form.
pub fn rfc2253(name: &X509Name<'_>) -> String {
    let rdns: Vec<String> = name
        .iter_rdn()
        .map(|rdn| rdn.iter().map(ava).collect::<Vec<_>>().join("+"))
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

fn ava(ava: &AttributeTypeAndValue<'_>) -> String {
    let oid = ava.attr_type().to_id_string();
    match KEYWORDS.iter().find(|(o, _)| *o == oid) {
        Some((_, keyword)) => match string_value(ava) {
            Some(value) => format!("{keyword}={}", escape(&value)),
            None => format!("{keyword}={}", hex_der(ava)),
        },
        None => format!("{oid}={}", hex_der(ava)),
    }
}

/// The value of a directory string, as Java decodes it.
fn string_value(ava: &AttributeTypeAndValue<'_>) -> Option<String> {
    let value = ava.attr_value();
    match value.tag() {
        Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::NumericString => {
            std::str::from_utf8(value.data).ok().map(str::to_owned)
        }
        // Java reads T61String as ISO-8859-1.
        Tag::T61String => Some(value.data.iter().map(|&b| b as char).collect()),
        Tag::BmpString => {
            if value.data.len() % 2 != 0 {
                return None;
            }
            let units: Vec<u16> = value
                .data
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

fn hex_der(ava: &AttributeTypeAndValue<'_>) -> String {
    let der = ava.attr_value().to_der_vec().unwrap_or_default();
    format!("#{}", hex::encode(der))
}

/// Java's `AVA.toRFC2253String`: `,=+<>#;"\` escaped wherever they are, and every leading and
/// trailing space.
fn escape(value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    let lead = chars.iter().take_while(|&&c| c == ' ').count();
    let trail = chars.len() - chars.iter().rev().take_while(|&&c| c == ' ').count();
    let mut out = String::with_capacity(value.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if ",=+<>#;\"\\".contains(c) || (c == ' ' && (i < lead || i >= trail)) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_java_does() {
        // What X500Principal.getName() printed for these values (OpenJDK 17).
        assert_eq!(escape("a#b=c d  "), r"a\#b\=c d\ \ ");
        assert_eq!(
            escape(r#" #lead;x<y>"q"\z "#),
            r#"\ \#lead\;x\<y\>\"q\"\\z\ "#
        );
        assert_eq!(escape("Acme, Inc."), r"Acme\, Inc.");
        assert_eq!(escape("plain text"), "plain text");
        assert_eq!(escape("   "), r"\ \ \ ");
    }
}

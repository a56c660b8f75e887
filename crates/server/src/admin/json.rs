//! JSON as ZooKeeper's AdminServer writes it: Jackson's default pretty printer (two-space
//! indent, `"key" : value`, `[ ]` and `{ }` when empty, arrays on one line with objects in them
//! opening on the same line) and keys in the order the command put them. Tools compare these
//! texts, so the order is part of the format and a sorted map would not do.

use std::fmt::Write as _;

/// A JSON value whose objects keep their keys in insertion order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    /// Written as Java's `Double.toString` would for the values the commands produce.
    Float(f64),
    Str(String),
    Array(Vec<Json>),
    Object(Object),
}

/// Keys in the order they were put.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Object(pub Vec<(String, Json)>);

impl Object {
    pub fn new() -> Object {
        Object(Vec::new())
    }

    /// Appends `key`, or replaces its value where it already is (as a Java LinkedHashMap).
    pub fn put(&mut self, key: impl Into<String>, value: impl Into<Json>) -> &mut Object {
        let key = key.into();
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.0.push((key, value)),
        }
        self
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

impl From<bool> for Json {
    fn from(v: bool) -> Json {
        Json::Bool(v)
    }
}

macro_rules! int_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Json {
            fn from(v: $t) -> Json {
                Json::Int(v as i64)
            }
        }
    )*};
}
int_from!(i32, i64, u16, u32, u64, usize);

impl From<f64> for Json {
    fn from(v: f64) -> Json {
        Json::Float(v)
    }
}

impl From<&str> for Json {
    fn from(v: &str) -> Json {
        Json::Str(v.to_owned())
    }
}

impl From<String> for Json {
    fn from(v: String) -> Json {
        Json::Str(v)
    }
}

impl From<Object> for Json {
    fn from(v: Object) -> Json {
        Json::Object(v)
    }
}

impl<T: Into<Json>> From<Vec<T>> for Json {
    fn from(v: Vec<T>) -> Json {
        Json::Array(v.into_iter().map(Into::into).collect())
    }
}

impl Json {
    /// The text Jackson's `writerWithDefaultPrettyPrinter` gives, without a final newline.
    pub fn to_pretty(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, 0);
        out
    }

    /// `depth`: how many objects enclose this value (arrays print inline and do not count).
    fn write(&self, out: &mut String, depth: usize) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Json::Float(f) => write_double(out, *f),
            Json::Str(s) => out.push_str(&serde_json::to_string(s).expect("a string encodes")),
            Json::Array(items) if items.is_empty() => out.push_str("[ ]"),
            Json::Array(items) => {
                out.push_str("[ ");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write(out, depth);
                }
                out.push_str(" ]");
            }
            Json::Object(o) if o.0.is_empty() => out.push_str("{ }"),
            Json::Object(o) => {
                out.push('{');
                for (i, (key, value)) in o.0.iter().enumerate() {
                    out.push_str(if i > 0 { ",\n" } else { "\n" });
                    indent(out, depth + 1);
                    out.push_str(&serde_json::to_string(key).expect("a string encodes"));
                    out.push_str(" : ");
                    value.write(out, depth + 1);
                }
                out.push('\n');
                indent(out, depth);
                out.push('}');
            }
        }
    }
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

/// Java prints a whole double with `.0` (`0.0`, `2.0`); Rust's `{:?}` does the same for the
/// finite values the commands produce. JSON has no NaN or infinity; Jackson writes them as
/// strings, and so does this.
fn write_double(out: &mut String, f: f64) {
    if f.is_finite() {
        let _ = write!(out, "{f:?}");
    } else {
        let _ = write!(out, "\"{f}\"");
    }
}

/// ZooKeeper rounds averages to four decimals (`AvgMinMaxCounter`).
pub fn round4(f: f64) -> f64 {
    (f * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The capture of ZooKeeper 3.9.5's `connections` (zk395-admin-json/connections.txt),
    /// one connection shortened to two fields.
    #[test]
    fn pretty_printing_is_jacksons() {
        let mut conn = Object::new();
        conn.put("remote_socket_address", "127.0.0.1:60690")
            .put("interest_ops", 1);
        let mut o = Object::new();
        o.put("connections", vec![Json::Object(conn)])
            .put("secure_connections", Vec::<Json>::new())
            .put("current_config", Object::new())
            .put("ids", vec![1, 2])
            .put("avg", 7.75)
            .put("zero", 0.0)
            .put("command", "connections")
            .put("error", Json::Null);
        assert_eq!(
            Json::Object(o).to_pretty(),
            "{\n  \"connections\" : [ {\n    \"remote_socket_address\" : \"127.0.0.1:60690\",\n    \
             \"interest_ops\" : 1\n  } ],\n  \"secure_connections\" : [ ],\n  \
             \"current_config\" : { },\n  \"ids\" : [ 1, 2 ],\n  \"avg\" : 7.75,\n  \
             \"zero\" : 0.0,\n  \"command\" : \"connections\",\n  \"error\" : null\n}"
        );
    }

    #[test]
    fn put_keeps_the_first_position_of_a_key() {
        let mut o = Object::new();
        o.put("error", "server is not initialized")
            .put("command", "leader")
            .put("error", "x");
        assert_eq!(o.0[0], ("error".to_owned(), Json::from("x")));
        assert_eq!(round4(37.0 / 9.0), 4.1111);
    }
}

//! JSON arguments to component values and component results back to JSON, by the rules
//! [`super::schema`] states. A conversion error names the field path and what was expected.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value};
use wasmtime::component::Val;
use wasmtime::component::types::{ComponentFunc, Type};

/// An argument that does not fit its WIT type: where, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct ArgError {
    /// The field path, e.g. `point.x` or `numbers[2]`.
    pub path: String,
    /// What was expected and what came.
    pub problem: String,
}

fn fail<T>(path: &str, problem: impl Into<String>) -> Result<T, ArgError> {
    Err(ArgError {
        path: path.to_owned(),
        problem: problem.into(),
    })
}

/// A short description of a JSON value for an error message: numbers, booleans and short
/// strings verbatim, the rest by kind.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.chars().count() <= 40 => format!("the string {value}"),
        Value::String(_) => "a string".into(),
        Value::Array(a) => format!("an array of {} items", a.len()),
        Value::Object(_) => "an object".into(),
    }
}

/// The arguments object of a call as the parameters of `func`, in order. An absent or `null`
/// `option` parameter is `none`; an unknown key is refused.
pub fn params(func: &ComponentFunc, args: &Value) -> Result<Vec<Val>, ArgError> {
    let Value::Object(object) = args else {
        return fail(
            "arguments",
            format!("expected an object, got {}", describe(args)),
        );
    };
    let names: Vec<&str> = func.params().map(|(n, _)| n).collect();
    if let Some(unknown) = object.keys().find(|k| !names.contains(&k.as_str())) {
        return fail(
            unknown,
            format!("unknown argument (expected {})", list(&names)),
        );
    }
    func.params()
        .map(|(name, ty)| field(&ty, object.get(name), name))
        .collect()
}

fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// A parameter or record field: an `option` may be absent or `null`, anything else is required.
fn field(ty: &Type, value: Option<&Value>, path: &str) -> Result<Val, ArgError> {
    match (ty, value) {
        (Type::Option(_), None | Some(Value::Null)) => Ok(Val::Option(None)),
        (Type::Option(o), Some(v)) => Ok(Val::Option(Some(Box::new(from_json(&o.ty(), v, path)?)))),
        (_, None) => fail(path, "missing (it is required)"),
        (ty, Some(v)) => from_json(ty, v, path),
    }
}

fn integer<T: TryFrom<i64> + TryFrom<u64>>(
    value: &Value,
    path: &str,
    range: (impl std::fmt::Display, impl std::fmt::Display),
) -> Result<T, ArgError> {
    let converted = match value {
        Value::Number(n) => n
            .as_i64()
            .and_then(|i| T::try_from(i).ok())
            .or_else(|| n.as_u64().and_then(|u| T::try_from(u).ok())),
        _ => None,
    };
    match converted {
        Some(v) => Ok(v),
        None => fail(
            path,
            format!(
                "expected an integer in {}..={}, got {}",
                range.0,
                range.1,
                describe(value)
            ),
        ),
    }
}

/// The component value of type `ty` that `value` stands for; `path` names it in errors.
pub fn from_json(ty: &Type, value: &Value, path: &str) -> Result<Val, ArgError> {
    Ok(match ty {
        Type::Bool => match value {
            Value::Bool(b) => Val::Bool(*b),
            _ => {
                return fail(
                    path,
                    format!("expected true or false, got {}", describe(value)),
                );
            }
        },
        Type::S8 => Val::S8(integer(value, path, (i8::MIN, i8::MAX))?),
        Type::U8 => Val::U8(integer(value, path, (u8::MIN, u8::MAX))?),
        Type::S16 => Val::S16(integer(value, path, (i16::MIN, i16::MAX))?),
        Type::U16 => Val::U16(integer(value, path, (u16::MIN, u16::MAX))?),
        Type::S32 => Val::S32(integer(value, path, (i32::MIN, i32::MAX))?),
        Type::U32 => Val::U32(integer(value, path, (u32::MIN, u32::MAX))?),
        Type::S64 => Val::S64(integer(value, path, (i64::MIN, i64::MAX))?),
        Type::U64 => Val::U64(integer(value, path, (u64::MIN, u64::MAX))?),
        Type::Float32 => match value.as_f64() {
            Some(f) if f.abs() <= f64::from(f32::MAX) => Val::Float32(f as f32),
            _ => {
                return fail(
                    path,
                    format!("expected a 32-bit number, got {}", describe(value)),
                );
            }
        },
        Type::Float64 => match value.as_f64() {
            Some(f) => Val::Float64(f),
            None => return fail(path, format!("expected a number, got {}", describe(value))),
        },
        Type::Char => {
            let mut chars = value.as_str().unwrap_or_default().chars();
            match (value.is_string(), chars.next(), chars.next()) {
                (true, Some(c), None) => Val::Char(c),
                _ => {
                    return fail(
                        path,
                        format!("expected a one-character string, got {}", describe(value)),
                    );
                }
            }
        }
        Type::String => match value {
            Value::String(s) => Val::String(s.clone()),
            _ => return fail(path, format!("expected a string, got {}", describe(value))),
        },
        Type::List(list) => match (list.ty(), value) {
            (Type::U8, Value::String(text)) => match BASE64.decode(text) {
                Ok(bytes) => Val::List(bytes.into_iter().map(Val::U8).collect()),
                Err(e) => return fail(path, format!("expected base64 text: {e}")),
            },
            (Type::U8, _) => {
                return fail(
                    path,
                    format!("expected base64 text, got {}", describe(value)),
                );
            }
            (item, Value::Array(items)) => Val::List(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| from_json(&item, v, &format!("{path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            _ => return fail(path, format!("expected an array, got {}", describe(value))),
        },
        Type::FixedLengthList(list) => {
            let len = list.len() as usize;
            match value {
                Value::Array(items) if items.len() == len => Val::FixedLengthList(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| from_json(&list.ty(), v, &format!("{path}[{i}]")))
                        .collect::<Result<_, _>>()?,
                ),
                _ => {
                    return fail(
                        path,
                        format!("expected an array of {len} items, got {}", describe(value)),
                    );
                }
            }
        }
        Type::Record(record) => {
            let Value::Object(object) = value else {
                return fail(path, format!("expected an object, got {}", describe(value)));
            };
            let names: Vec<&str> = record.fields().map(|f| f.name).collect();
            if let Some(unknown) = object.keys().find(|k| !names.contains(&k.as_str())) {
                return fail(
                    &format!("{path}.{unknown}"),
                    format!("unknown field (expected {})", list(&names)),
                );
            }
            Val::Record(
                record
                    .fields()
                    .map(|f| {
                        let at = format!("{path}.{}", f.name);
                        field(&f.ty, object.get(f.name), &at).map(|v| (f.name.to_owned(), v))
                    })
                    .collect::<Result<_, _>>()?,
            )
        }
        Type::Tuple(tuple) => {
            let len = tuple.types().len();
            match value {
                Value::Array(items) if items.len() == len => Val::Tuple(
                    tuple
                        .types()
                        .zip(items)
                        .enumerate()
                        .map(|(i, (t, v))| from_json(&t, v, &format!("{path}[{i}]")))
                        .collect::<Result<_, _>>()?,
                ),
                _ => {
                    return fail(
                        path,
                        format!("expected an array of {len} items, got {}", describe(value)),
                    );
                }
            }
        }
        Type::Variant(variant) => {
            let names: Vec<&str> = variant.cases().map(|c| c.name).collect();
            let expected = || {
                format!(
                    "expected {{\"tag\": one of {}, \"value\": ...}}",
                    list(&names)
                )
            };
            let Value::Object(object) = value else {
                return fail(path, format!("{}, got {}", expected(), describe(value)));
            };
            let tag = object.get("tag").and_then(Value::as_str);
            let Some(case) = variant.cases().find(|c| Some(c.name) == tag) else {
                return fail(&format!("{path}.tag"), expected());
            };
            if let Some(extra) = object.keys().find(|k| *k != "tag" && *k != "value") {
                return fail(
                    &format!("{path}.{extra}"),
                    "unknown field (expected tag, value)",
                );
            }
            let at = format!("{path}.value");
            let payload = match (&case.ty, object.get("value")) {
                (Some(ty), Some(v)) => Some(Box::new(from_json(ty, v, &at)?)),
                (Some(_), None) => {
                    return fail(
                        &at,
                        format!("missing (case `{}` carries a value)", case.name),
                    );
                }
                (None, None) => None,
                (None, Some(_)) => {
                    return fail(&at, format!("case `{}` carries no value", case.name));
                }
            };
            Val::Variant(case.name.to_owned(), payload)
        }
        Type::Enum(e) => {
            let names: Vec<&str> = e.names().collect();
            match value.as_str() {
                Some(s) if names.contains(&s) => Val::Enum(s.to_owned()),
                _ => {
                    return fail(
                        path,
                        format!("expected one of {}, got {}", list(&names), describe(value)),
                    );
                }
            }
        }
        Type::Option(o) => match value {
            Value::Null => Val::Option(None),
            v => Val::Option(Some(Box::new(from_json(&o.ty(), v, path)?))),
        },
        Type::Result(r) => {
            let (key, inner) = match value {
                Value::Object(object) if object.len() == 1 && object.contains_key("ok") => {
                    ("ok", r.ok())
                }
                Value::Object(object) if object.len() == 1 && object.contains_key("err") => {
                    ("err", r.err())
                }
                _ => {
                    return fail(
                        path,
                        format!(
                            "expected {{\"ok\": ...}} or {{\"err\": ...}}, got {}",
                            describe(value)
                        ),
                    );
                }
            };
            let at = format!("{path}.{key}");
            let payload = match (inner, &value[key]) {
                (Some(ty), v) => Some(Box::new(from_json(&ty, v, &at)?)),
                (None, Value::Null) => None,
                (None, v) => return fail(&at, format!("expected null, got {}", describe(v))),
            };
            Val::Result(if key == "ok" {
                Ok(payload)
            } else {
                Err(payload)
            })
        }
        Type::Flags(flags) => {
            let names: Vec<&str> = flags.names().collect();
            let Value::Array(items) = value else {
                return fail(
                    path,
                    format!("expected an array of flag names, got {}", describe(value)),
                );
            };
            let mut set: Vec<String> = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match item.as_str() {
                    Some(s) if set.iter().any(|f| f == s) => {
                        return fail(&format!("{path}[{i}]"), format!("flag `{s}` appears twice"));
                    }
                    Some(s) if names.contains(&s) => set.push(s.to_owned()),
                    _ => {
                        return fail(
                            &format!("{path}[{i}]"),
                            format!("expected one of {}, got {}", list(&names), describe(item)),
                        );
                    }
                }
            }
            Val::Flags(set)
        }
        // Refused when the tools were derived; never reached for a loaded component.
        Type::Map(_)
        | Type::Own(_)
        | Type::Borrow(_)
        | Type::Future(_)
        | Type::Stream(_)
        | Type::ErrorContext => return fail(path, "this type cannot be passed as JSON"),
    })
}

/// A component value of type `ty` as JSON (the inverse of [`from_json`]; an `option` field is
/// `null` when none, a float that is not finite is `null`).
pub fn to_json(ty: &Type, val: &Val) -> Value {
    match (ty, val) {
        (_, Val::Bool(b)) => Value::Bool(*b),
        (_, Val::S8(n)) => Value::from(*n),
        (_, Val::U8(n)) => Value::from(*n),
        (_, Val::S16(n)) => Value::from(*n),
        (_, Val::U16(n)) => Value::from(*n),
        (_, Val::S32(n)) => Value::from(*n),
        (_, Val::U32(n)) => Value::from(*n),
        (_, Val::S64(n)) => Value::from(*n),
        (_, Val::U64(n)) => Value::from(*n),
        (_, Val::Float32(f)) => float(f64::from(*f)),
        (_, Val::Float64(f)) => float(*f),
        (_, Val::Char(c)) => Value::String(c.to_string()),
        (_, Val::String(s)) => Value::String(s.clone()),
        (Type::List(list), Val::List(items)) if list.ty() == Type::U8 => {
            let bytes: Vec<u8> = items
                .iter()
                .filter_map(|v| match v {
                    Val::U8(b) => Some(*b),
                    _ => None,
                })
                .collect();
            Value::String(BASE64.encode(bytes))
        }
        (Type::List(list), Val::List(items)) => {
            let item = list.ty();
            Value::Array(items.iter().map(|v| to_json(&item, v)).collect())
        }
        (Type::FixedLengthList(list), Val::FixedLengthList(items)) => {
            let item = list.ty();
            Value::Array(items.iter().map(|v| to_json(&item, v)).collect())
        }
        (Type::Record(record), Val::Record(fields)) => Value::Object(
            record
                .fields()
                .zip(fields)
                .map(|(f, (name, v))| (name.clone(), to_json(&f.ty, v)))
                .collect::<Map<_, _>>(),
        ),
        (Type::Tuple(tuple), Val::Tuple(items)) => Value::Array(
            tuple
                .types()
                .zip(items)
                .map(|(t, v)| to_json(&t, v))
                .collect(),
        ),
        (Type::Variant(variant), Val::Variant(name, payload)) => {
            let mut object = Map::new();
            object.insert("tag".into(), Value::String(name.clone()));
            let ty = variant.cases().find(|c| c.name == name).and_then(|c| c.ty);
            if let (Some(ty), Some(v)) = (ty, payload) {
                object.insert("value".into(), to_json(&ty, v));
            }
            Value::Object(object)
        }
        (_, Val::Enum(name)) => Value::String(name.clone()),
        (Type::Option(o), Val::Option(Some(v))) => to_json(&o.ty(), v),
        (Type::Option(_), Val::Option(None)) => Value::Null,
        (Type::Result(r), Val::Result(v)) => {
            let (key, ty, payload) = match v {
                Ok(p) => ("ok", r.ok(), p),
                Err(p) => ("err", r.err(), p),
            };
            let inner = match (ty, payload) {
                (Some(ty), Some(p)) => to_json(&ty, p),
                _ => Value::Null,
            };
            let mut object = Map::new();
            object.insert(key.into(), inner);
            Value::Object(object)
        }
        (_, Val::Flags(names)) => Value::Array(names.iter().cloned().map(Value::String).collect()),
        // Types refused at load, or a value that does not match its type (a wasmtime bug).
        _ => Value::Null,
    }
}

fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

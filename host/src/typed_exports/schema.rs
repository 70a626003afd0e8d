//! JSON Schemas derived from WIT types: what an agent may send as a typed function's arguments
//! and what it gets back. [`super::values`] converts by exactly these rules.

use serde_json::{Value, json};
use wasmtime::component::types::{ComponentFunc, Type};

/// Which way a value travels: options are left out of arguments but always present (as `null`
/// when none) in results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// An argument, from the agent to the component.
    Input,
    /// A result, from the component to the agent.
    Output,
}

/// The key a result value is wrapped in: a tool's result is always a JSON object.
pub const RESULT_KEY: &str = "result";

/// The input schema of `func`: an object with one property per parameter; a parameter of an
/// `option` type may be left out.
pub fn input(func: &ComponentFunc) -> Result<Value, String> {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for (name, ty) in func.params() {
        let (schema, optional) = field(&ty, Side::Input)?;
        if !optional {
            required.push(Value::from(name));
        }
        properties.insert(name.to_owned(), schema);
    }
    Ok(json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    }))
}

/// The output schema of `func`: an object holding the value under [`RESULT_KEY`] (for a
/// `result<T, E>`, the `ok` value: an `err` is the call's error), or an empty object for a
/// function that returns nothing.
pub fn output(func: &ComponentFunc) -> Result<Value, String> {
    let mut results = func.results();
    let Some(ty) = results.next() else {
        return Ok(json!({"type": "object", "properties": {}, "additionalProperties": false}));
    };
    let value = match &ty {
        Type::Result(r) => match r.ok() {
            Some(ok) => Some(of(&ok, Side::Output)?),
            None => None,
        },
        other => Some(of(other, Side::Output)?),
    };
    Ok(match value {
        Some(schema) => json!({
            "type": "object",
            "properties": {RESULT_KEY: schema},
            "required": [RESULT_KEY],
            "additionalProperties": false,
        }),
        None => json!({"type": "object", "properties": {}, "additionalProperties": false}),
    })
}

/// The schema of a parameter or record field of type `ty`, and whether it may be left out (an
/// `option` argument).
fn field(ty: &Type, side: Side) -> Result<(Value, bool), String> {
    match (ty, side) {
        (Type::Option(o), Side::Input) => Ok((of(&o.ty(), side)?, true)),
        _ => Ok((of(ty, side)?, false)),
    }
}

/// An integer schema with the range of the WIT type.
fn integer(min: impl Into<Value>, max: impl Into<Value>) -> Value {
    json!({"type": "integer", "minimum": min.into(), "maximum": max.into()})
}

/// The JSON Schema of a value of type `ty`.
pub fn of(ty: &Type, side: Side) -> Result<Value, String> {
    Ok(match ty {
        Type::Bool => json!({"type": "boolean"}),
        Type::S8 => integer(i8::MIN, i8::MAX),
        Type::U8 => integer(u8::MIN, u8::MAX),
        Type::S16 => integer(i16::MIN, i16::MAX),
        Type::U16 => integer(u16::MIN, u16::MAX),
        Type::S32 => integer(i32::MIN, i32::MAX),
        Type::U32 => integer(u32::MIN, u32::MAX),
        Type::S64 => integer(i64::MIN, i64::MAX),
        Type::U64 => integer(u64::MIN, u64::MAX),
        // JSON has no NaN or infinity: a result that is one arrives as `null`.
        Type::Float32 | Type::Float64 => match side {
            Side::Input => json!({"type": "number"}),
            Side::Output => json!({"type": ["number", "null"]}),
        },
        Type::Char => json!({"type": "string", "minLength": 1, "maxLength": 1}),
        Type::String => json!({"type": "string"}),
        Type::List(list) => match list.ty() {
            Type::U8 => json!({"type": "string", "contentEncoding": "base64"}),
            item => json!({"type": "array", "items": of(&item, side)?}),
        },
        Type::FixedLengthList(list) => {
            let len = list.len();
            json!({"type": "array", "items": of(&list.ty(), side)?, "minItems": len, "maxItems": len})
        }
        Type::Record(record) => {
            let mut properties = serde_json::Map::new();
            let mut required = Vec::new();
            for f in record.fields() {
                let (schema, optional) = field(&f.ty, side)?;
                if !optional {
                    required.push(Value::from(f.name));
                }
                properties.insert(f.name.to_owned(), schema);
            }
            json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            })
        }
        Type::Tuple(tuple) => {
            let items = tuple
                .types()
                .map(|t| of(&t, side))
                .collect::<Result<Vec<_>, _>>()?;
            let len = items.len();
            json!({"type": "array", "prefixItems": items, "minItems": len, "maxItems": len})
        }
        Type::Variant(variant) => {
            let cases = variant
                .cases()
                .map(|case| tagged(case.name, case.ty.as_ref(), side))
                .collect::<Result<Vec<_>, _>>()?;
            json!({"oneOf": cases})
        }
        Type::Enum(e) => json!({"type": "string", "enum": e.names().collect::<Vec<_>>()}),
        Type::Option(o) => json!({"anyOf": [of(&o.ty(), side)?, {"type": "null"}]}),
        Type::Result(r) => {
            let ok = tagged_result("ok", r.ok().as_ref(), side)?;
            let err = tagged_result("err", r.err().as_ref(), side)?;
            json!({"oneOf": [ok, err]})
        }
        Type::Flags(flags) => json!({
            "type": "array",
            "items": {"type": "string", "enum": flags.names().collect::<Vec<_>>()},
            "uniqueItems": true,
        }),
        Type::Map(_) => return Err(unsupported("a `map`")),
        Type::Own(_) | Type::Borrow(_) => {
            return Err(unsupported("a resource handle"));
        }
        Type::Future(_) | Type::Stream(_) | Type::ErrorContext => {
            return Err(unsupported(
                "an async type (future, stream or error-context)",
            ));
        }
    })
}

/// One case of a variant: `{"tag": "<case>", "value": <payload>}`, without `value` for a case
/// that carries nothing.
fn tagged(name: &str, payload: Option<&Type>, side: Side) -> Result<Value, String> {
    Ok(match payload {
        Some(ty) => json!({
            "type": "object",
            "properties": {"tag": {"const": name}, "value": of(ty, side)?},
            "required": ["tag", "value"],
            "additionalProperties": false,
        }),
        None => json!({
            "type": "object",
            "properties": {"tag": {"const": name}},
            "required": ["tag"],
            "additionalProperties": false,
        }),
    })
}

/// One side of a `result` inside a value: `{"ok": <value>}` or `{"err": <value>}` (`null` when
/// that side carries nothing).
fn tagged_result(key: &str, payload: Option<&Type>, side: Side) -> Result<Value, String> {
    let value = match payload {
        Some(ty) => of(ty, side)?,
        None => json!({"type": "null"}),
    };
    Ok(json!({
        "type": "object",
        "properties": {key: value},
        "required": [key],
        "additionalProperties": false,
    }))
}

/// Why a type cannot be a tool's argument or result.
fn unsupported(what: &str) -> String {
    format!("takes or returns {what}, which has no JSON form")
}

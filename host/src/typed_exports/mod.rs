//! Components that export plain typed WIT functions instead of `chitin:tool`: one tool per
//! function, its schemas derived from the function's type (no code of the component runs to
//! describe it), its arguments converted from JSON to component values and its result back.

pub mod docs;
pub mod schema;
pub mod values;

use chitin_registry::manifest::{ToolAnnotations, ToolSpec};
use serde_json::Value;
use wasmtime::Engine;
use wasmtime::component::types::{ComponentFunc, ComponentItem, Type};
use wasmtime::component::{Component, ComponentExportIndex, Val};

use crate::tool_error::ToolError;
pub use docs::Docs;

/// A typed export chitin cannot serve, or a set of them whose tool names collide.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TypedExportError {
    /// A function's signature uses something chitin cannot serve as a tool.
    #[error(
        "exported function `{function}` {reason}; chitin serves plain synchronous functions of value types only"
    )]
    Unsupported {
        /// The function, as WIT names it (`name` or `interface#name`).
        function: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Two functions map to the same tool name.
    #[error(
        "exported functions `{first}` and `{second}` would both be the tool `{tool}`; rename one"
    )]
    Collision {
        /// The shared tool name.
        tool: String,
        /// The first function.
        first: String,
        /// The second function.
        second: String,
    },
    /// A tool name that chitin's rules refuse.
    #[error("exported function `{function}`: {reason}")]
    BadName {
        /// The function.
        function: String,
        /// Why its tool name is refused.
        reason: String,
    },
}

/// One exported function served as a tool.
#[derive(Clone)]
pub struct TypedFunc {
    /// The tool's own name: the function name in snake case, prefixed by its interface's name.
    pub tool: String,
    /// The function as WIT names it: `name` at world level, `interface#name` in an interface.
    pub export: String,
    /// Its type.
    pub ty: ComponentFunc,
    index: ComponentExportIndex,
}

impl std::fmt::Debug for TypedFunc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedFunc")
            .field("tool", &self.tool)
            .field("export", &self.export)
            .finish()
    }
}

impl TypedFunc {
    /// Where the function sits among the component's exports.
    pub fn index(&self) -> ComponentExportIndex {
        self.index
    }
}

/// A WIT name in snake case, as tool names are (`parse-int` → `parse_int`).
fn snake(name: &str) -> String {
    name.replace('-', "_")
}

/// The short name of an exported interface: `stats` for `acme:measure/stats@1.0.0`.
fn interface_short(name: &str) -> &str {
    let unversioned = name.split('@').next().unwrap_or(name);
    unversioned.rsplit('/').next().unwrap_or(unversioned)
}

/// Every function `component` exports, at world level or in an exported interface, as tools in
/// export order. Resource methods, async functions and value types that have no JSON form are
/// refused, naming the function.
pub fn discover(
    engine: &Engine,
    component: &Component,
) -> Result<Vec<TypedFunc>, TypedExportError> {
    let mut funcs: Vec<TypedFunc> = Vec::new();
    let ty = component.component_type();
    for (name, item) in ty.exports(engine) {
        match item.ty {
            ComponentItem::ComponentFunc(func) => {
                let index = export_index(component, None, name)?;
                funcs.push(typed(snake(name), name.to_owned(), func, index)?);
            }
            ComponentItem::ComponentInstance(instance) => {
                let parent = export_index(component, None, name)?;
                for (function, item) in instance.exports(engine) {
                    let ComponentItem::ComponentFunc(func) = item.ty else {
                        continue;
                    };
                    let export = format!("{name}#{function}");
                    let index = export_index(component, Some(&parent), function)?;
                    let tool = format!("{}_{}", snake(interface_short(name)), snake(function));
                    funcs.push(typed(tool, export, func, index)?);
                }
            }
            _ => {}
        }
    }
    for (i, f) in funcs.iter().enumerate() {
        if let Some(other) = funcs[..i].iter().find(|o| o.tool == f.tool) {
            return Err(TypedExportError::Collision {
                tool: f.tool.clone(),
                first: other.export.clone(),
                second: f.export.clone(),
            });
        }
    }
    Ok(funcs)
}

fn export_index(
    component: &Component,
    parent: Option<&ComponentExportIndex>,
    name: &str,
) -> Result<ComponentExportIndex, TypedExportError> {
    component
        .get_export_index(parent, name)
        .ok_or_else(|| TypedExportError::Unsupported {
            function: name.to_owned(),
            reason: "cannot be found among the component's exports".into(),
        })
}

fn typed(
    tool: String,
    export: String,
    ty: ComponentFunc,
    index: ComponentExportIndex,
) -> Result<TypedFunc, TypedExportError> {
    let unsupported = |reason: String| TypedExportError::Unsupported {
        function: export.clone(),
        reason,
    };
    // Resource constructors, methods and statics carry their resource in brackets.
    if export.contains('[') {
        return Err(unsupported("belongs to a resource".into()));
    }
    if ty.async_() {
        return Err(unsupported("is async".into()));
    }
    if ty.results().len() > 1 {
        return Err(unsupported("returns more than one value".into()));
    }
    schema::input(&ty).map_err(unsupported)?;
    schema::output(&ty).map_err(unsupported)?;
    if let Some(reason) = chitin_registry::manifest::tool_name_problem(&tool) {
        return Err(TypedExportError::BadName {
            function: export,
            reason,
        });
    }
    Ok(TypedFunc {
        tool,
        export,
        ty,
        index,
    })
}

/// The tool specs of `funcs`, descriptions from `docs` (or, for a function without docs, a line
/// naming it).
pub fn specs(funcs: &[TypedFunc], docs: &Docs) -> Result<Vec<ToolSpec>, TypedExportError> {
    funcs
        .iter()
        .map(|f| {
            let unsupported = |reason: String| TypedExportError::Unsupported {
                function: f.export.clone(),
                reason,
            };
            let input = schema::input(&f.ty).map_err(unsupported)?;
            let output = schema::output(&f.ty).map_err(unsupported)?;
            Ok(ToolSpec {
                name: f.tool.clone(),
                description: docs
                    .get(&f.export)
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("Calls the exported WIT function `{}`.", f.export)),
                input_schema: input.to_string(),
                output_schema: Some(output.to_string()),
                annotations: ToolAnnotations::default(),
            })
        })
        .collect()
}

/// The call's arguments (JSON text) as `func`'s parameters; the error names the field.
pub fn arguments(func: &TypedFunc, args_json: &str) -> Result<Vec<Val>, ToolError> {
    let args: Value = serde_json::from_str(args_json)
        .map_err(|e| ToolError::InvalidArgs(format!("arguments are not valid JSON: {e}")))?;
    values::params(&func.ty, &args).map_err(|e| ToolError::InvalidArgs(e.to_string()))
}

/// What a call of `func` returned, as the tool's JSON result: the value under
/// [`schema::RESULT_KEY`]. An `err` of a `result` is the call's `execution-failed` error,
/// carrying the error value as JSON.
pub fn result(func: &TypedFunc, results: &[Val]) -> Result<String, ToolError> {
    let (Some(ty), Some(val)) = (func.ty.results().next(), results.first()) else {
        return Ok("{}".into());
    };
    let value = match (&ty, val) {
        (Type::Result(r), Val::Result(Err(payload))) => {
            let error = match (r.err(), payload) {
                (Some(ty), Some(p)) => values::to_json(&ty, p).to_string(),
                _ => "null".into(),
            };
            return Err(ToolError::ExecutionFailed(format!(
                "`{}` returned an error: {error}",
                func.export
            )));
        }
        (Type::Result(r), Val::Result(Ok(payload))) => match (r.ok(), payload) {
            (Some(ty), Some(p)) => values::to_json(&ty, p),
            _ => return Ok("{}".into()),
        },
        (ty, val) => values::to_json(ty, val),
    };
    Ok(serde_json::json!({ schema::RESULT_KEY: value }).to_string())
}

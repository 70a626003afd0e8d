//! A component artifact: a `.wasm` file holding a WebAssembly component. Reads what it is, its
//! content hash, and its WIT world (imports and exports), without compiling or running it.

use std::fmt;
use std::ops::Range;

use wasmparser::{Chunk, Parser, Payload};

use wit_parser::{Resolve, WorldId, WorldItem, WorldKey};

use crate::manifest::{Manifest, ManifestError};

/// Why bytes are not a usable component artifact.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The bytes do not start with the WebAssembly magic number.
    #[error("not a WebAssembly file (it does not start with the `\\0asm` magic bytes)")]
    NotWasm,
    /// The file is shorter than a WebAssembly header.
    #[error("truncated: {0} bytes is shorter than a WebAssembly header")]
    TooShort(usize),
    /// A core module, not a component.
    #[error(
        "is a core WebAssembly module, not a component: build it for the wasm32-wasip2 target \
         or wrap it with `wasm-tools component new`"
    )]
    CoreModule,
    /// The binary is cut short or malformed.
    #[error("truncated or malformed component: {0}")]
    Malformed(String),
}

/// What kind of WebAssembly binary the bytes hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryKind {
    /// A component (component-model layer).
    Component,
    /// A core module.
    CoreModule,
}

/// Check the 8-byte header: WebAssembly magic and the component layer.
pub fn check_header(bytes: &[u8]) -> Result<(), ArtifactError> {
    if bytes.len() >= 4 && !bytes.starts_with(b"\0asm") {
        return Err(ArtifactError::NotWasm);
    }
    if bytes.len() < 8 {
        return Err(if bytes.starts_with(b"\0asm") || bytes.len() < 4 {
            ArtifactError::TooShort(bytes.len())
        } else {
            ArtifactError::NotWasm
        });
    }
    match kind(bytes) {
        Some(BinaryKind::Component) => Ok(()),
        Some(BinaryKind::CoreModule) => Err(ArtifactError::CoreModule),
        None => Err(ArtifactError::Malformed(
            "unknown WebAssembly version or layer in the header".into(),
        )),
    }
}

/// The kind of binary, from its header.
pub fn kind(bytes: &[u8]) -> Option<BinaryKind> {
    if wasmparser::Parser::is_component(bytes) {
        Some(BinaryKind::Component)
    } else if wasmparser::Parser::is_core_wasm(bytes) {
        Some(BinaryKind::CoreModule)
    } else {
        None
    }
}

/// The BLAKE3 hash of an artifact's bytes: its identity in caches, lockfiles and registries.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentHash(pub [u8; 32]);

impl ContentHash {
    /// Hash `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(*blake3::hash(bytes).as_bytes())
    }

    /// Lower-case hex.
    pub fn to_hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "blake3:{}", self.to_hex())
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Validate the whole binary (every section), as a compiler would, without compiling it.
pub fn validate(bytes: &[u8]) -> Result<(), ArtifactError> {
    check_header(bytes)?;
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(bytes)
        .map(|_| ())
        .map_err(|e| ArtifactError::Malformed(e.to_string()))
}

/// The WIT world of a component: what it imports and exports.
pub struct WitWorld {
    resolve: Resolve,
    world: WorldId,
}

impl WitWorld {
    /// Decode the world a component targets from its binary.
    pub fn decode(bytes: &[u8]) -> Result<Self, ArtifactError> {
        check_header(bytes)?;
        match wit_parser::decoding::decode(bytes) {
            Ok(wit_parser::decoding::DecodedWasm::Component(resolve, world)) => {
                Ok(Self { resolve, world })
            }
            Ok(wit_parser::decoding::DecodedWasm::WitPackage(..)) => Err(ArtifactError::Malformed(
                "holds a WIT package, not a component".into(),
            )),
            Err(e) => Err(ArtifactError::Malformed(format!("{e:#}"))),
        }
    }

    /// Names of the imported interfaces and functions, e.g. `wasi:cli/environment@0.2.6`.
    pub fn imports(&self) -> Vec<String> {
        let world = &self.resolve.worlds[self.world];
        world
            .imports
            .iter()
            .filter(|(_, item)| !matches!(item, WorldItem::Type { .. }))
            .map(|(key, _)| self.key_name(key))
            .collect()
    }

    /// Names of the exported interfaces and functions, e.g. `chitin:tool/tool@0.1.0`.
    pub fn exports(&self) -> Vec<String> {
        let world = &self.resolve.worlds[self.world];
        world.exports.keys().map(|key| self.key_name(key)).collect()
    }

    /// The world as WIT text, with every package it refers to.
    pub fn to_wit(&self) -> Result<String, ArtifactError> {
        let world = &self.resolve.worlds[self.world];
        let Some(pkg) = world.package else {
            return Err(ArtifactError::Malformed("world has no package".into()));
        };
        let nested: Vec<_> = self
            .resolve
            .packages
            .iter()
            .map(|(id, _)| id)
            .filter(|id| *id != pkg)
            .collect();
        let mut printer = wit_component::WitPrinter::default();
        printer
            .print(&self.resolve, pkg, &nested)
            .map_err(|e| ArtifactError::Malformed(format!("cannot print WIT: {e:#}")))?;
        Ok(printer.output.to_string())
    }

    fn key_name(&self, key: &WorldKey) -> String {
        self.resolve.name_world_key(key)
    }
}

/// The custom section that carries a component's manifest (TOML).
pub const MANIFEST_SECTION: &str = "chitin-manifest";

/// A top-level custom section: its name, its data, and the byte range of the whole section
/// (id, size and contents) in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomSection<'a> {
    /// Section name.
    pub name: &'a str,
    /// Section data.
    pub data: &'a [u8],
    /// The whole section's bytes in the file.
    pub span: Range<usize>,
}

/// The custom sections at the top level of a component (not those of nested modules).
pub fn custom_sections(bytes: &[u8]) -> Result<Vec<CustomSection<'_>>, ArtifactError> {
    check_header(bytes)?;
    let mut parser = Parser::new(0);
    let mut pos = 0;
    let mut out = Vec::new();
    loop {
        let rest = bytes.get(pos..).unwrap_or_default();
        let (consumed, payload) = match parser
            .parse(rest, true)
            .map_err(|e| ArtifactError::Malformed(e.to_string()))?
        {
            Chunk::NeedMoreData(_) => {
                return Err(ArtifactError::Malformed("the file is cut short".into()));
            }
            Chunk::Parsed { consumed, payload } => (consumed, payload),
        };
        let start = pos;
        pos += consumed;
        match payload {
            Payload::CustomSection(c) => out.push(CustomSection {
                name: c.name(),
                data: c.data(),
                span: start..pos,
            }),
            Payload::ModuleSection {
                unchecked_range, ..
            }
            | Payload::ComponentSection {
                unchecked_range, ..
            } => {
                // Nested modules and components are skipped whole (the parser has already moved
                // past them; only the header was consumed): their custom sections are not the
                // artifact's.
                let len = unchecked_range.end.saturating_sub(unchecked_range.start);
                pos = usize::try_from(len)
                    .ok()
                    .and_then(|len| pos.checked_add(len))
                    .ok_or_else(|| {
                        ArtifactError::Malformed("a nested section is too large".into())
                    })?;
            }
            Payload::End(_) => return Ok(out),
            _ => {}
        }
    }
}

/// The manifest text embedded in a component, if it carries one.
pub fn manifest_text(bytes: &[u8]) -> Result<Option<&str>, ArtifactError> {
    let mut found = None;
    for section in custom_sections(bytes)? {
        if section.name != MANIFEST_SECTION {
            continue;
        }
        if found.is_some() {
            return Err(ArtifactError::Malformed(format!(
                "it carries more than one `{MANIFEST_SECTION}` section"
            )));
        }
        found = Some(std::str::from_utf8(section.data).map_err(|_| {
            ArtifactError::Malformed(format!("the `{MANIFEST_SECTION}` section is not UTF-8"))
        })?);
    }
    Ok(found)
}

/// The manifest embedded in a component could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedManifestError {
    /// The bytes are no artifact, or its manifest section is malformed.
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    /// The manifest text is not a valid manifest.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

impl Manifest {
    /// The manifest embedded in a component's bytes, parsed and validated; `None` when it
    /// carries none.
    pub fn from_artifact(bytes: &[u8]) -> Result<Option<Self>, EmbeddedManifestError> {
        Ok(Self::from_artifact_with_text(bytes)?.map(|(manifest, _)| manifest))
    }

    /// [`Manifest::from_artifact`], with the text it was parsed from (what a lockfile pins by
    /// hash).
    pub fn from_artifact_with_text(
        bytes: &[u8],
    ) -> Result<Option<(Self, &str)>, EmbeddedManifestError> {
        let Some(text) = manifest_text(bytes)? else {
            return Ok(None);
        };
        Ok(Some((Self::parse(text)?, text)))
    }
}

/// `bytes` with `manifest` as its manifest section, replacing any it carried, appended after the
/// component's other sections.
pub fn embed_manifest(bytes: &[u8], manifest: &str) -> Result<Vec<u8>, ArtifactError> {
    let old: Vec<Range<usize>> = custom_sections(bytes)?
        .into_iter()
        .filter(|s| s.name == MANIFEST_SECTION)
        .map(|s| s.span)
        .collect();
    let mut out = Vec::with_capacity(bytes.len() + manifest.len() + 32);
    let mut pos = 0;
    for span in old {
        out.extend_from_slice(&bytes[pos..span.start]);
        pos = span.end;
    }
    out.extend_from_slice(&bytes[pos..]);
    out.extend_from_slice(&custom_section(MANIFEST_SECTION, manifest.as_bytes()));
    Ok(out)
}

/// The parts of a component that are its code: every byte but the top-level sections chitin adds
/// (its manifest and signatures), in order. No compiler reads those sections, so two files that
/// differ only in them compile to the same machine code: re-signing a component, or changing its
/// manifest, needs no new compile.
pub fn code_ranges(bytes: &[u8]) -> Result<Vec<Range<usize>>, ArtifactError> {
    let added = [
        MANIFEST_SECTION,
        crate::signature::SIGNATURE_SECTION,
        crate::signature::DELIMITER_SECTION,
    ];
    let mut ranges = Vec::new();
    let mut pos = 0;
    for section in custom_sections(bytes)? {
        if added.contains(&section.name) {
            if section.span.start > pos {
                ranges.push(pos..section.span.start);
            }
            pos = section.span.end;
        }
    }
    if pos < bytes.len() {
        ranges.push(pos..bytes.len());
    }
    Ok(ranges)
}

/// The code of a component ([`code_ranges`]) as one component: the bytes without chitin's
/// manifest and signature sections.
pub fn code(bytes: &[u8]) -> Result<Vec<u8>, ArtifactError> {
    let mut out = Vec::with_capacity(bytes.len());
    for range in code_ranges(bytes)? {
        let part = bytes
            .get(range)
            .ok_or_else(|| ArtifactError::Malformed("a section ends past the file".into()))?;
        out.extend_from_slice(part);
    }
    Ok(out)
}

/// Encode one custom section (id 0, size, name, data).
pub fn custom_section(name: &str, data: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(name.len() + data.len() + 5);
    leb128(&mut body, name.len());
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(data);
    let mut out = Vec::with_capacity(body.len() + 6);
    out.push(0);
    leb128(&mut out, body.len());
    out.extend_from_slice(&body);
    out
}

/// Unsigned LEB128, the encoding of every length in a WebAssembly binary.
fn leb128(out: &mut Vec<u8>, mut value: usize) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_text_that_is_not_wasm() {
        assert!(matches!(
            check_header(b"hello world"),
            Err(ArtifactError::NotWasm)
        ));
    }

    #[test]
    fn refuses_a_core_module() {
        let core = b"\0asm\x01\0\0\0";
        assert!(matches!(check_header(core), Err(ArtifactError::CoreModule)));
    }

    #[test]
    fn refuses_a_header_cut_short() {
        assert!(matches!(
            check_header(b"\0as"),
            Err(ArtifactError::TooShort(3))
        ));
    }

    #[test]
    fn accepts_a_component_header() {
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
    }

    #[test]
    fn hashes_are_stable_hex() {
        let h = ContentHash::of(b"abc");
        assert_eq!(h.to_hex().len(), 64);
        assert!(h.to_string().starts_with("blake3:"));
    }

    /// The smallest component: just the header.
    const EMPTY: &[u8] = b"\0asm\x0d\0\x01\0";

    #[test]
    fn a_manifest_is_embedded_read_back_and_replaced() {
        assert_eq!(manifest_text(EMPTY).expect("parses"), None);
        let one = embed_manifest(EMPTY, "schema = 1").expect("embeds");
        assert_eq!(manifest_text(&one).expect("parses"), Some("schema = 1"));
        let two = embed_manifest(&one, "schema = 2").expect("re-embeds");
        assert_eq!(manifest_text(&two).expect("parses"), Some("schema = 2"));
        assert_eq!(two.len(), one.len());
    }

    #[test]
    fn two_manifest_sections_are_refused() {
        let mut twice = embed_manifest(EMPTY, "a").expect("embeds");
        twice.extend(custom_section(MANIFEST_SECTION, b"b"));
        assert!(matches!(
            manifest_text(&twice),
            Err(ArtifactError::Malformed(_))
        ));
    }

    #[test]
    fn the_embedded_manifest_is_parsed_or_its_error_says_which_part_failed() {
        assert!(matches!(Manifest::from_artifact(EMPTY), Ok(None)));
        let text = "schema = 1\n[component]\nname = \"e\"\nnamespace = \"acme\"\n\
                    version = \"1.0.0\"\npublisher = \"acme\"\n";
        let good = embed_manifest(EMPTY, text).expect("embeds");
        let (manifest, read) = Manifest::from_artifact_with_text(&good)
            .expect("parses")
            .expect("a manifest");
        assert_eq!((manifest.id().as_str(), read), ("acme/e", text));
        let bad = embed_manifest(EMPTY, "schema = 2").expect("embeds");
        assert!(matches!(
            Manifest::from_artifact(&bad),
            Err(EmbeddedManifestError::Manifest(_))
        ));
        let mut twice = good;
        twice.extend(custom_section(MANIFEST_SECTION, b"b"));
        assert!(matches!(
            Manifest::from_artifact(&twice),
            Err(EmbeddedManifestError::Artifact(ArtifactError::Malformed(_)))
        ));
    }

    #[test]
    fn code_ranges_leave_out_the_manifest_and_signature_sections_only() {
        let bare = [EMPTY, &custom_section("name", b"kept")[..]].concat();
        let mut wasm = bare.clone();
        wasm.extend(custom_section(crate::signature::SIGNATURE_SECTION, b"sig"));
        wasm.extend(custom_section(MANIFEST_SECTION, b"schema = 1"));
        wasm.extend(custom_section(crate::signature::DELIMITER_SECTION, b"d"));
        wasm.extend(custom_section("producers", b"also kept"));
        let kept = code(&wasm).expect("parses");
        assert_eq!(
            kept,
            [bare, custom_section("producers", b"also kept")].concat()
        );
        let resigned = embed_manifest(&wasm, "schema = 2").expect("embeds");
        assert_eq!(code(&resigned).expect("parses"), kept);
        assert!(code_ranges(b"\0asm\x0d\0\x01\0\x00\xff").is_err());
    }

    #[test]
    fn a_long_section_uses_a_multi_byte_length() {
        let text = "x".repeat(70_000);
        let wasm = embed_manifest(EMPTY, &text).expect("embeds");
        assert_eq!(manifest_text(&wasm).expect("parses"), Some(text.as_str()));
    }
}

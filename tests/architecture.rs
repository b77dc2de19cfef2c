//! The shape the code keeps, checked: no import cycle between the library's top-level modules,
//! a pure core (a crate of its own with pure dependencies only; no I/O, no clock, no async),
//! and no module over 400 lines of non-test code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every library source file with the top-level module it belongs to (the binary's `cli` and
/// entry points are not the library's).
fn library_files() -> Vec<(String, PathBuf)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("reads the source tree") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&Path::new(ROOT).join("src"), &mut files);
    walk(&Path::new(ROOT).join("consumers"), &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let rel = path.strip_prefix(ROOT).ok()?.to_string_lossy().into_owned();
            let module = if rel.starts_with("consumers/") {
                "consumers".to_owned()
            } else {
                let first = rel.strip_prefix("src/")?.split('/').next()?.to_owned();
                first.trim_end_matches(".rs").to_owned()
            };
            let binary = ["cli", "main", "lib"].contains(&module.as_str());
            (!binary).then_some((module, path))
        })
        .collect()
}

/// The `crate::<module>` names a source text refers to.
fn references(text: &str) -> BTreeSet<String> {
    text.match_indices("crate::")
        .filter_map(|(i, m)| {
            let rest = &text[i + m.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in library_files() {
        let text = std::fs::read_to_string(&path).expect("reads a source file");
        let deps = graph.entry(module.clone()).or_default();
        // The core is a crate of its own: its `crate::` is the core, and it cannot name the node.
        if module == "core" {
            continue;
        }
        deps.extend(references(&text).into_iter().filter(|d| *d != module));
    }
    for key in [
        "api",
        "cluster",
        "config",
        "consumers",
        "ledger",
        "node",
        "partition",
    ] {
        assert!(graph.contains_key(key), "module {key} is where it was");
    }
    // Depth-first search for a path back to where it started.
    fn cycle(
        graph: &BTreeMap<String, BTreeSet<String>>,
        start: &str,
        at: &str,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        for next in graph.get(at).into_iter().flatten() {
            if next == start {
                let mut found = path.clone();
                found.push(next.clone());
                return Some(found);
            }
            if !path.contains(next) {
                path.push(next.clone());
                if let Some(found) = cycle(graph, start, next, path) {
                    return Some(found);
                }
                path.pop();
            }
        }
        None
    }
    for module in graph.keys() {
        let mut path = vec![module.clone()];
        if let Some(found) = cycle(&graph, module, module, &mut path) {
            panic!("import cycle: {}", found.join(" -> "));
        }
    }
}

#[test]
fn the_core_is_pure() {
    // The compiler keeps the core away from the node's I/O as long as its crate depends on
    // nothing that does I/O: exactly these, each pure.
    let manifest = std::fs::read_to_string(Path::new(ROOT).join("src/core/Cargo.toml"))
        .expect("core manifest");
    let manifest: toml::Table = manifest.parse().expect("core manifest is TOML");
    let deps: BTreeSet<&str> = manifest["dependencies"]
        .as_table()
        .expect("a [dependencies] table")
        .keys()
        .map(String::as_str)
        .collect();
    let pure = BTreeSet::from([
        "bincode",
        "hex",
        "serde",
        "serde_json",
        "sha2",
        "thiserror",
        "time",
        "uuid",
    ]);
    assert_eq!(deps, pure, "the core's dependencies changed: keep it pure");
    for (module, path) in library_files() {
        if module != "core" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("reads a source file");
        // What the code says, not what its comments say about it.
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for impure in [
            "tokio",
            "sled",
            "rdkafka",
            "reqwest",
            "SystemTime",
            "Instant",
            "std::fs",
            "std::net",
            "async fn",
        ] {
            assert!(
                !code.contains(impure),
                "{} uses {impure}: the core has no I/O, no clock and no async",
                path.display()
            );
        }
    }
}

#[test]
fn no_module_is_over_400_lines_of_code() {
    for (_, path) in library_files() {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // Test code and test-support suites do not count.
        if name == "tests.rs" || name.ends_with("_tests.rs") || name == "conformance.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("reads a source file");
        let code = text
            .lines()
            .take_while(|l| !l.starts_with("#[cfg(test)]"))
            .count();
        assert!(
            code <= 400,
            "{} has {code} lines before its tests: split it by concept",
            path.display()
        );
    }
}

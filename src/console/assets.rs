//! The console's files, compiled into the binary. The script and the stylesheet are served under
//! names that carry a hash of their content (`app.3f2a….js`), so a browser may keep them for
//! ever and a new build's page never runs an old script; the page itself is never cached.

use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

const PAGE: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// One file, under its content-addressed name.
struct Asset {
    name: String,
    body: &'static str,
    content_type: &'static str,
}

impl Asset {
    fn new(stem: &str, extension: &str, body: &'static str, content_type: &'static str) -> Self {
        let digest = hex::encode(Sha256::digest(body.as_bytes()));
        Self {
            name: format!("{stem}.{}.{extension}", &digest[..16]),
            body,
            content_type,
        }
    }
}

static FILES: LazyLock<[Asset; 2]> = LazyLock::new(|| {
    [
        Asset::new("app", "js", SCRIPT, "text/javascript; charset=utf-8"),
        Asset::new("app", "css", STYLE, "text/css; charset=utf-8"),
    ]
});

/// The page, pointing at the files by their current names.
static RENDERED_PAGE: LazyLock<String> = LazyLock::new(|| {
    PAGE.replace("{{app.js}}", &FILES[0].name)
        .replace("{{app.css}}", &FILES[1].name)
});

/// `GET /ui/`.
pub(super) async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        RENDERED_PAGE.as_str(),
    )
        .into_response()
}

/// `GET /ui/{file}`: the script or the stylesheet, by its current name.
pub(super) async fn file(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|f| f.name == name) {
        Some(f) => (
            [
                (header::CONTENT_TYPE, f.content_type),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            ],
            f.body,
        )
            .into_response(),
        None => super::no_such_file(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_the_files_by_their_content() {
        for f in FILES.iter() {
            assert!(RENDERED_PAGE.contains(&f.name), "{}", f.name);
        }
        assert!(!RENDERED_PAGE.contains("{{"));
        assert_ne!(FILES[0].name, FILES[1].name);
    }

    #[test]
    fn the_page_has_no_inline_script_or_style() {
        // The content security policy allows only the node's own files.
        assert!(!PAGE.contains("<style"));
        assert!(!PAGE.contains("style="));
        assert!(!PAGE.contains("onclick"));
        for tag in PAGE.match_indices("<script") {
            let rest = &PAGE[tag.0..];
            let end = rest.find('>').expect("a closed tag");
            assert!(rest[..end].contains("src="), "an inline script");
        }
    }
}

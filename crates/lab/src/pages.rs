//! Web page models: objects with sizes and dependency levels.
//!
//! The papers give per-page object counts by type and a total size, not the individual objects,
//! so the objects are synthesised deterministically from that data:
//! - level 0 is the root HTML document; the other HTML, CSS, JS and "other" objects are level 1
//!   (discovered in the root); images are level 2 (discovered after CSS/JS are processed);
//! - bytes are split between types by fixed shares (HTML 15 %, CSS 10 %, JS 35 %, images 35 %,
//!   other 5 %, renormalised over the types present) and, within a type, in proportion to
//!   1/(i+1) (a few large objects, many small ones);
//! - sizes are whole bytes and the last object absorbs rounding, so the total is exact.
//!
//! Only the counts and the totals are facts from the papers; the split is our model.

use serde::{Deserialize, Serialize};

/// Object types of paper 001 Table II.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    Html,
    Css,
    Js,
    Image,
    Other,
}

/// One object of a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageObject {
    pub kind: ObjectKind,
    pub bytes: u64,
    /// Dependency level: requested once every object of lower levels has arrived.
    pub level: u32,
}

/// A page: a named list of objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageModel {
    pub name: String,
    pub objects: Vec<PageObject>,
}

/// Paper 001 Table II: (site, [html, css, js, image, other], total kB).
pub const PAPER001_PAGES: [(&str, [u32; 5], u64); 11] = [
    ("google", [2, 1, 3, 5, 1], 56),
    ("live", [2, 2, 2, 2, 0], 262),
    ("twitter", [6, 1, 4, 2, 3], 421),
    ("wikipedia", [1, 1, 2, 20, 1], 441),
    ("reddit", [4, 2, 5, 26, 2], 470),
    ("yahoo", [16, 13, 5, 48, 4], 839),
    ("ebay", [4, 1, 6, 3, 14], 985),
    ("instagram", [3, 1, 7, 25, 1], 1409),
    ("youtube", [8, 3, 5, 113, 20], 2911),
    ("facebook", [1, 1, 8, 123, 1], 3560),
    ("amazon", [5, 2, 14, 41, 2], 3723),
];

/// Type split assumed for paper 000's flickr page (30 objects; the paper gives no breakdown).
pub const FLICKR_COUNTS: [u32; 5] = [2, 2, 6, 19, 1];
/// Paper 000: flickr.com, 30 objects, 1,776 KiB.
pub const FLICKR_BYTES: u64 = 1776 * 1024;

const KINDS: [ObjectKind; 5] = [
    ObjectKind::Html,
    ObjectKind::Css,
    ObjectKind::Js,
    ObjectKind::Image,
    ObjectKind::Other,
];
const SHARES: [f64; 5] = [0.15, 0.10, 0.35, 0.35, 0.05];

impl PageModel {
    /// Synthesise a page from per-type counts ([html, css, js, image, other]) and a total.
    pub fn synthetic(name: &str, counts: [u32; 5], total_bytes: u64) -> Self {
        let share_sum: f64 = (0..5).filter(|&i| counts[i] > 0).map(|i| SHARES[i]).sum();
        let mut objects = Vec::new();
        for (i, &n) in counts.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let type_bytes = total_bytes as f64 * SHARES[i] / share_sum;
            let harmonic: f64 = (1..=n).map(|j| 1.0 / f64::from(j)).sum();
            for j in 0..n {
                let level = match KINDS[i] {
                    ObjectKind::Html if j == 0 => 0,
                    ObjectKind::Image => 2,
                    _ => 1,
                };
                let bytes = (type_bytes / f64::from(j + 1) / harmonic)
                    .round()
                    .max(100.0) as u64;
                objects.push(PageObject {
                    kind: KINDS[i],
                    bytes,
                    level,
                });
            }
        }
        // The root document first, then by level (stable: type order within a level).
        objects.sort_by_key(|o| o.level);
        let sum: u64 = objects.iter().map(|o| o.bytes).sum();
        // Give the rounding difference to the largest object so the total is exact.
        if let Some(big) = objects.iter_mut().max_by_key(|o| o.bytes) {
            big.bytes = (big.bytes + total_bytes).saturating_sub(sum).max(1);
        }
        PageModel {
            name: name.to_string(),
            objects,
        }
    }

    /// Paper 000's web workload: www.flickr.com, 30 objects, 1,776 KiB.
    pub fn flickr() -> Self {
        Self::synthetic("flickr", FLICKR_COUNTS, FLICKR_BYTES)
    }

    /// One of paper 001's Table II pages (sizes in kB = 1000 bytes).
    pub fn paper001(site: &str) -> Option<Self> {
        PAPER001_PAGES
            .iter()
            .find(|(n, _, _)| n.eq_ignore_ascii_case(site))
            .map(|(n, counts, kb)| Self::synthetic(n, *counts, kb * 1000))
    }

    /// A page by name: "flickr" or one of paper 001's sites; the error lists valid names.
    pub fn by_name(name: &str) -> Result<Self, String> {
        if name.eq_ignore_ascii_case("flickr") {
            return Ok(Self::flickr());
        }
        Self::paper001(name).ok_or_else(|| {
            let mut names = vec!["flickr"];
            names.extend(PAPER001_PAGES.iter().map(|p| p.0));
            format!("unknown page {name:?}; valid pages: {}", names.join(", "))
        })
    }

    pub fn total_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.bytes).sum()
    }

    /// Number of dependency levels (max level + 1).
    pub fn levels(&self) -> u32 {
        self.objects.iter().map(|o| o.level + 1).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flickr_matches_paper_000() {
        let p = PageModel::flickr();
        assert_eq!(p.objects.len(), 30);
        assert_eq!(p.total_bytes(), 1_818_624);
        assert_eq!(p.objects[0].level, 0);
        assert_eq!(p.objects[0].kind, ObjectKind::Html);
        assert_eq!(p.levels(), 3);
        assert_eq!(p, PageModel::flickr(), "deterministic");
    }

    #[test]
    fn paper001_pages_match_table_ii() {
        for (name, counts, kb) in PAPER001_PAGES {
            let p = PageModel::paper001(name).unwrap();
            let n: u32 = counts.iter().sum();
            assert_eq!(p.objects.len() as u32, n, "{name}");
            assert_eq!(p.total_bytes(), kb * 1000, "{name}");
            assert!(p.objects.iter().all(|o| o.bytes > 0));
            assert_eq!(p.objects.iter().filter(|o| o.level == 0).count(), 1);
        }
        assert_eq!(PageModel::paper001("YouTube").unwrap().objects.len(), 149);
        let e = PageModel::by_name("bing").unwrap_err();
        assert!(e.contains("flickr, google, live"), "{e}");
    }
}

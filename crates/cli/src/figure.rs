//! Figures in the format their file name asks for: the lab draws SVG (plotters); PNG
//! (resvg) and PDF (svg2pdf) are rendered from that SVG, with the system's fonts.

use std::path::Path;

use anyhow::{Context, Result, bail};
use resvg::{tiny_skia, usvg};

/// A figure's output format, from its file name's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
    Pdf,
}

impl Format {
    /// The format `path` names, or a one-line error saying which ones there are.
    pub fn of(flag: &str, path: &Path) -> Result<Format> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("svg") => Ok(Format::Svg),
            Some("png") => Ok(Format::Png),
            Some("pdf") => Ok(Format::Pdf),
            _ => bail!("{flag} {}: name an .svg, .png or .pdf file", path.display()),
        }
    }
}

/// Writes `svg` into `out` as it is, or rendered as PNG (twice the SVG's size, for screens)
/// or PDF.
pub fn render(svg: &str, format: Format, out: &Path) -> Result<()> {
    let bytes = match format {
        Format::Svg => svg.as_bytes().to_vec(),
        Format::Png => {
            let tree = parse(svg)?;
            let size = tree.size().to_int_size();
            let mut pixmap = tiny_skia::Pixmap::new(size.width() * 2, size.height() * 2)
                .context("the figure has no area")?;
            pixmap.fill(tiny_skia::Color::WHITE);
            resvg::render(
                &tree,
                tiny_skia::Transform::from_scale(2.0, 2.0),
                &mut pixmap.as_mut(),
            );
            pixmap.encode_png().context("cannot encode the PNG")?
        }
        Format::Pdf => svg2pdf::to_pdf(
            &parse(svg)?,
            svg2pdf::ConversionOptions::default(),
            svg2pdf::PageOptions::default(),
        )
        .map_err(|e| anyhow::anyhow!("cannot make the PDF: {e}"))?,
    };
    std::fs::write(out, bytes).with_context(|| format!("cannot write {}", out.display()))
}

/// The SVG as a tree to render, its text in the system's fonts.
fn parse(svg: &str) -> Result<usvg::Tree> {
    let mut options = usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    // The figures ask for "sans-serif"; name an installed family for it (fontdb's default,
    // Arial, is often missing, and text would silently vanish).
    let family = fonts
        .faces()
        .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
        .filter(|n| n.contains("Sans") && !n.contains("Mono"))
        .min_by_key(|n| (n != "DejaVu Sans", n.len()));
    match family {
        Some(f) => fonts.set_sans_serif_family(f),
        None => bail!(
            "no sans-serif font on this system for the figure's text: install one (e.g. the \
             fonts-dejavu-core package), or write an .svg"
        ),
    }
    usvg::Tree::from_str(svg, &options).context("cannot read the drawn SVG")
}

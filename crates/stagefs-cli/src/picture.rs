//! Pictures (`plotters`, SVG or PNG by the file's extension): the block maps of
//! `inspect` (an erase-count heat map and a block-state map side by side), the wear
//! projection of `plan`, and the bench comparison of `bench-plot`.

use std::path::Path;

use oftl::{BlockInfo, BlockState};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Blocks per row of a block map.
const COLUMNS: usize = 32;
/// Side of a block's square, pixels.
const CELL: u32 = 14;

type Area<DB> = DrawingArea<DB, Shift>;

fn backend_error<E: std::fmt::Debug>(e: E) -> String {
    format!("drawing: {e:?}")
}

/// The colour of an erase count between `lo` and `hi`: blue (least worn) through
/// green and yellow to red (most worn).
fn wear_colour(e: u32, lo: u32, hi: u32) -> RGBColor {
    let t = if hi > lo {
        (e - lo) as f64 / (hi - lo) as f64
    } else {
        0.0
    };
    let hsl = HSLColor((1.0 - t) * 0.66, 0.85, 0.5);
    let (r, g, b) = hsl.rgb();
    RGBColor(r, g, b)
}

/// The colour of a block's state (full blocks shaded by their share of valid pages).
fn state_colour(b: &BlockInfo, ppb: u32) -> RGBColor {
    match b.state() {
        BlockState::Free => RGBColor(225, 225, 225),
        BlockState::Window => RGBColor(66, 133, 244),
        BlockState::Bad => RGBColor(200, 30, 30),
        BlockState::Reserved => RGBColor(40, 40, 40),
        BlockState::Full => {
            let share = b.valid() as f64 / ppb.max(1) as f64;
            let g = (230.0 - 150.0 * share) as u8;
            RGBColor((g as f64 * 0.55) as u8, g, (g as f64 * 0.55) as u8)
        }
    }
}

fn grid<DB: DrawingBackend>(
    area: &Area<DB>,
    title: &str,
    blocks: &[BlockInfo],
    colour: impl Fn(&BlockInfo) -> RGBColor,
) -> Result<(), String> {
    area.fill(&WHITE).map_err(backend_error)?;
    area.draw(&Text::new(title, (8, 6), ("sans-serif", 15).into_font()))
        .map_err(backend_error)?;
    for (i, b) in blocks.iter().enumerate() {
        let x = 8 + (i % COLUMNS) as i32 * CELL as i32;
        let y = 30 + (i / COLUMNS) as i32 * CELL as i32;
        let c = CELL as i32 - 1;
        area.draw(&Rectangle::new(
            [(x, y), (x + c, y + c)],
            colour(b).filled(),
        ))
        .map_err(backend_error)?;
        if b.state() == BlockState::Bad {
            area.draw(&PathElement::new(vec![(x, y), (x + c, y + c)], WHITE))
                .map_err(backend_error)?;
        }
    }
    Ok(())
}

fn legend<DB: DrawingBackend>(
    area: &Area<DB>,
    y: i32,
    items: &[(RGBColor, String)],
) -> Result<(), String> {
    let mut x = 8;
    for (c, label) in items {
        area.draw(&Rectangle::new([(x, y), (x + 11, y + 11)], c.filled()))
            .map_err(backend_error)?;
        area.draw(&Text::new(
            label.as_str(),
            (x + 15, y),
            ("sans-serif", 12).into_font(),
        ))
        .map_err(backend_error)?;
        x += 15 + 6 * label.len() as i32 + 12;
    }
    Ok(())
}

fn block_maps_on<DB: DrawingBackend>(
    root: Area<DB>,
    part: &str,
    ppb: u32,
    blocks: &[BlockInfo],
) -> Result<(), String> {
    let (left, right) = root.split_horizontally(root.dim_in_pixel().0 / 2);
    let good: Vec<u32> = blocks
        .iter()
        .filter(|b| b.state() != BlockState::Bad)
        .map(|b| b.erases())
        .collect();
    let lo = good.iter().copied().min().unwrap_or(0);
    let hi = good.iter().copied().max().unwrap_or(0);
    grid(
        &left,
        &format!("{part}: erase count per block ({lo} to {hi})"),
        blocks,
        |b| {
            if b.state() == BlockState::Bad {
                RGBColor(0, 0, 0)
            } else {
                wear_colour(b.erases(), lo, hi)
            }
        },
    )?;
    grid(&right, &format!("{part}: block states"), blocks, |b| {
        state_colour(b, ppb)
    })?;
    let y = 30 + blocks.len().div_ceil(COLUMNS) as i32 * CELL as i32 + 10;
    let mid = lo + (hi - lo) / 2;
    legend(
        &left,
        y,
        &[
            (wear_colour(lo, lo, hi), format!("{lo} erases")),
            (wear_colour(mid, lo, hi), format!("{mid}")),
            (wear_colour(hi, lo, hi), format!("{hi}")),
            (RGBColor(0, 0, 0), "bad".into()),
        ],
    )?;
    let full = |v: u16| BlockInfo::new(BlockState::Full, v, 0);
    legend(
        &right,
        y,
        &[
            (state_colour(&BlockInfo::FREE, ppb), "free".into()),
            (
                state_colour(&BlockInfo::new(BlockState::Window, 0, 0), ppb),
                "window".into(),
            ),
            (state_colour(&full(0), ppb), "full, stale".into()),
            (state_colour(&full(ppb as u16), ppb), "full, valid".into()),
            (RGBColor(200, 30, 30), "bad".into()),
            (RGBColor(40, 40, 40), "reserved".into()),
        ],
    )?;
    root.present().map_err(backend_error)
}

/// Writes the block maps of `blocks` to `path` (`.svg` or `.png`).
pub fn block_maps(path: &Path, part: &str, ppb: u32, blocks: &[BlockInfo]) -> Result<(), String> {
    let rows = blocks.len().div_ceil(COLUMNS) as u32;
    let w = 2 * (16 + COLUMNS as u32 * CELL);
    let h = 30 + rows * CELL + 40;
    match extension(path)? {
        Kind::Svg => block_maps_on(
            SVGBackend::new(path, (w, h)).into_drawing_area(),
            part,
            ppb,
            blocks,
        ),
        Kind::Png => block_maps_on(
            BitMapBackend::new(path, (w, h)).into_drawing_area(),
            part,
            ppb,
            blocks,
        ),
    }
}

enum Kind {
    Svg,
    Png,
}

fn extension(path: &Path) -> Result<Kind, String> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => Ok(Kind::Svg),
        Some(e) if e.eq_ignore_ascii_case("png") => Ok(Kind::Png),
        _ => Err(format!(
            "{}: the picture's name must end in .svg or .png",
            path.display()
        )),
    }
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(90, 90, 90),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
];

fn lines_on<DB: DrawingBackend>(
    root: Area<DB>,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[(String, Vec<(f64, f64)>)],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(backend_error)?;
    let pts = lines.iter().flat_map(|(_, p)| p.iter());
    let (mut x1, mut y1) = (0.0f64, 0.0f64);
    for &(x, y) in pts {
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x1.max(1e-9), 0.0..(y1 * 1.08).max(1.0))
        .map_err(backend_error)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(backend_error)?;
    for (i, (name, p)) in lines.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(p.iter().copied(), c.stroke_width(2)))
            .map_err(backend_error)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(backend_error)?;
    root.present().map_err(backend_error)
}

/// A line chart of `lines` (name, points) to `path` (`.svg` or `.png`).
pub fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[(String, Vec<(f64, f64)>)],
) -> Result<(), String> {
    let size = (760, 440);
    match extension(path)? {
        Kind::Svg => lines_on(
            SVGBackend::new(path, size).into_drawing_area(),
            title,
            x_label,
            y_label,
            lines,
        ),
        Kind::Png => lines_on(
            BitMapBackend::new(path, size).into_drawing_area(),
            title,
            x_label,
            y_label,
            lines,
        ),
    }
}

/// One panel of a grouped bar chart: a value per (group, series), on a log scale.
pub struct Bars {
    /// The panel's title.
    pub title: String,
    /// The groups along the x axis (workloads).
    pub groups: Vec<String>,
    /// The series (systems), each with one value per group (`None`: not measured).
    pub series: Vec<(String, Vec<Option<f64>>)>,
}

fn bars_on<DB: DrawingBackend>(root: Area<DB>, panels: &[Bars]) -> Result<(), String> {
    root.fill(&WHITE).map_err(backend_error)?;
    let h = root.dim_in_pixel().1;
    let (charts, key) = root.split_vertically(h.saturating_sub(34));
    if let Some(p) = panels.first() {
        let items: Vec<(RGBColor, String)> = p
            .series
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (PALETTE[i % PALETTE.len()], n.clone()))
            .collect();
        legend(&key, 8, &items)?;
    }
    let areas = charts.split_evenly((1, panels.len().max(1)));
    for (area, p) in areas.iter().zip(panels) {
        let vals = || {
            p.series
                .iter()
                .flat_map(|(_, v)| v.iter().flatten().copied())
        };
        let top = vals().fold(1e-9f64, f64::max);
        let bottom = vals().filter(|v| *v > 0.0).fold(top, f64::min) / 2.0;
        let n = p.series.len().max(1) as f64;
        let mut chart = ChartBuilder::on(area)
            .caption(p.title.as_str(), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..p.groups.len() as f64, (bottom..top * 3.0).log_scale())
            .map_err(backend_error)?;
        let groups = p.groups.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_label_formatter(&|y| {
                if *y >= 1e6 {
                    format!("{}M", y / 1e6)
                } else if *y >= 1e3 {
                    format!("{}k", y / 1e3)
                } else {
                    format!("{y}")
                }
            })
            .x_labels(groups.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let i = (*x - 0.5).round();
                if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < groups.len() {
                    groups[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .draw()
            .map_err(backend_error)?;
        for (si, (name, vals)) in p.series.iter().enumerate() {
            let c = PALETTE[si % PALETTE.len()];
            let w = 0.8 / n;
            chart
                .draw_series(vals.iter().enumerate().filter_map(|(g, v)| {
                    v.map(|v| {
                        let x0 = g as f64 + 0.1 + w * si as f64;
                        Rectangle::new([(x0, bottom), (x0 + w * 0.92, v.max(bottom))], c.filled())
                    })
                }))
                .map_err(backend_error)?;
            let _ = name;
        }
    }
    root.present().map_err(backend_error)
}

/// Grouped bar charts side by side to `path` (`.svg` or `.png`).
pub fn bars(path: &Path, panels: &[Bars]) -> Result<(), String> {
    // Room for each group's label (a workload name of up to ~14 characters).
    let groups = panels.iter().map(|p| p.groups.len()).max().unwrap_or(0) as u32;
    let panel = (90 * groups + 80).max(520);
    let size = (panel * panels.len().max(1) as u32, 420);
    match extension(path)? {
        Kind::Svg => bars_on(SVGBackend::new(path, size).into_drawing_area(), panels),
        Kind::Png => bars_on(BitMapBackend::new(path, size).into_drawing_area(), panels),
    }
}

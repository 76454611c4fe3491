//! SVG plots in the manner of HPVM's Fig. 2–3: one-way latency and
//! streamed bandwidth against message size, fastmsg and Open MPI on the
//! same axes (sizes on a log2 axis; 0-byte points are in the tables only).

use crate::report::{human, Metric, Results, FASTMSG, MPI};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// A plot could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("plot {path}: {what}")]
pub struct PlotDrawError {
    /// The SVG file.
    pub path: PathBuf,
    /// What failed.
    pub what: String,
}

const COLORS: [RGBColor; 5] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
];

struct Curve {
    label: String,
    points: Vec<(f64, f64)>,
    dashed: bool,
}

fn curve(
    r: &Results,
    series: &str,
    metric: Metric,
    scale: f64,
    label: &str,
    dashed: bool,
) -> Curve {
    let points = r
        .sizes(series)
        .into_iter()
        .filter(|&s| s > 0)
        .filter_map(|s| {
            r.med(series, s, metric)
                .map(|v| ((s as f64).log2(), v * scale))
        })
        .filter(|&(_, v)| v > 0.0)
        .collect();
    Curve {
        label: label.to_owned(),
        points,
        dashed,
    }
}

fn draw(
    path: &Path,
    title: &str,
    y_desc: &str,
    log_y: bool,
    curves: &[Curve],
) -> Result<(), PlotDrawError> {
    let err = |e: &dyn std::fmt::Debug| PlotDrawError {
        path: path.to_owned(),
        what: format!("{e:?}"),
    };
    let pts: Vec<(f64, f64)> = curves
        .iter()
        .flat_map(|c| c.points.iter().copied())
        .collect();
    if pts.is_empty() {
        return Err(err(&"no data to plot"));
    }
    // x is log2(size): labels fall on powers of two.
    let xmax = pts.iter().map(|p| p.0).fold(1.0, f64::max) + 0.5;
    let ymax = pts.iter().map(|p| p.1).fold(f64::MIN_POSITIVE, f64::max);
    let ymin = pts.iter().map(|p| p.1).fold(f64::MAX, f64::min);
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(80);
    let x = -0.5f64..xmax;
    macro_rules! finish {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc("message size")
                .y_desc(y_desc)
                .x_labels(12)
                .x_label_formatter(&|v| human(2f64.powf(v.round()) as usize))
                .draw()
                .map_err(|e| err(&e))?;
            for (i, c) in curves.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                let style = if c.dashed {
                    color.mix(0.5).stroke_width(2)
                } else {
                    color.stroke_width(2)
                };
                chart
                    .draw_series(LineSeries::new(c.points.clone(), style))
                    .map_err(|e| err(&e))?
                    .label(c.label.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                chart
                    .draw_series(c.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(|e| err(&e))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|e| err(&e))?;
        }};
    }
    if log_y {
        finish!(b
            .build_cartesian_2d(x, (ymin * 0.7..ymax * 1.5).log_scale())
            .map_err(|e| err(&e))?);
    } else {
        finish!(b
            .build_cartesian_2d(x, 0.0..ymax * 1.1)
            .map_err(|e| err(&e))?);
    }
    root.present().map_err(|e| err(&e))
}

/// Write `latency.svg`, `bandwidth.svg` and (when measured) `copy.svg`
/// into `dir`; returns the files written.
///
/// # Errors
/// The first plot that failed.
pub fn write_all(r: &Results, dir: &Path) -> Result<Vec<PathBuf>, PlotDrawError> {
    let mut out = Vec::new();
    let lat = dir.join("latency.svg");
    draw(
        &lat,
        "One-way latency (ping-pong RTT/2), 2 processes, shared memory",
        "one-way latency (µs)",
        true,
        &[
            curve(r, FASTMSG, Metric::LatMean, 1e-3, "fastmsg (mean)", false),
            curve(r, MPI, Metric::LatMean, 1e-3, "Open MPI (mean)", false),
            curve(r, FASTMSG, Metric::LatP99, 1e-3, "fastmsg p99", true),
        ],
    )?;
    out.push(lat);
    let bw = dir.join("bandwidth.svg");
    draw(
        &bw,
        "Streamed bandwidth (64 messages in flight), 2 processes, shared memory",
        "bandwidth (MB/s, 1e6 B/s)",
        false,
        &[
            curve(r, FASTMSG, Metric::Bw, 1.0, "fastmsg", false),
            curve(r, MPI, Metric::Bw, 1.0, "Open MPI", false),
        ],
    )?;
    out.push(bw);
    let copies: Vec<String> = r
        .series()
        .into_iter()
        .filter(|s| s.starts_with("fastmsg shm, "))
        .collect();
    if !copies.is_empty() {
        let sizes = r.sizes(&copies[0]);
        let mut curves = vec![Curve {
            label: "tuned plan (default)".to_owned(),
            points: sizes
                .iter()
                .filter_map(|&s| {
                    r.med(FASTMSG, s, Metric::Bw)
                        .map(|v| ((s as f64).log2(), v))
                })
                .collect(),
            dashed: false,
        }];
        for s in &copies {
            curves.push(curve(
                r,
                s,
                Metric::Bw,
                1.0,
                s.trim_start_matches("fastmsg shm, "),
                false,
            ));
        }
        let p = dir.join("copy.svg");
        draw(
            &p,
            "fastmsg bandwidth by frame-copy strategy",
            "bandwidth (MB/s, 1e6 B/s)",
            false,
            &curves,
        )?;
        out.push(p);
    }
    Ok(out)
}

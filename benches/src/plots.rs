//! SVG plots of a run (plotters). Every axis says what it counts, in K / M
//! units; workloads are named under their bars. `benches/render-plots.sh`
//! turns them into PNG to look at.

use std::path::Path;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{Report, distinct, human, workload_label};

mod ticks;
use crate::scale::{ScalePoint, ScaleReport};
use ticks::log_ticks;

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("plotting: {e}")
}

/// A fixed color per engine, the same in every plot.
fn engine_color(engine: &str, index: usize) -> RGBColor {
    match engine {
        "bloomlsm" => RGBColor(31, 119, 180),
        "rocksdb" => RGBColor(214, 39, 40),
        "bloomlsm-optimized" => RGBColor(44, 160, 44),
        "bloomlsm-nofilter" => RGBColor(150, 150, 150),
        "bloomlsm-standard" => RGBColor(148, 103, 189),
        _ => {
            let c = Palette99::pick(index).to_rgba();
            RGBColor(c.0, c.1, c.2)
        }
    }
}

/// A log axis range covering `values` with some room.
fn log_range(values: impl Iterator<Item = f64>, pad: f64) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        (0.1, 10.0)
    } else {
        (lo / pad, hi * pad)
    }
}

/// Throughput per workload (top, log scale) and each engine's ratio to
/// RocksDB in the same workload (bottom), workload names under the groups.
pub fn throughput(report: &Report, path: &Path) -> Result<()> {
    let ms = &report.measurements;
    let labels: Vec<String> = {
        let all: Vec<String> = ms.iter().map(workload_label).collect();
        distinct(all.iter().map(String::as_str))
            .into_iter()
            .map(str::to_string)
            .collect()
    };
    let engines = distinct(ms.iter().map(|m| m.engine.as_str()));
    let find = |engine: &str, label: &str| {
        ms.iter()
            .find(|m| m.engine == engine && workload_label(m) == label)
    };
    let groups = labels.len().max(1) as f64;
    let width = (140 * labels.len() as u32 + 200).max(900);
    let root = SVGBackend::new(path, (width, 900)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, bottom) = root.split_vertically(520);
    let (lo, hi) = log_range(ms.iter().map(|m| m.ops_per_sec), 1.5);
    let mut chart = ChartBuilder::on(&top)
        .caption(
            "Throughput per workload, ops/s (log scale; one run, same machine)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(58)
        .y_label_area_size(80)
        .build_cartesian_2d(
            0.0..groups,
            (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(1)
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|v| human(*v))
        .y_desc("ops/s")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let bar_w = 0.84 / engines.len().max(1) as f64;
    for (e, engine) in engines.iter().enumerate() {
        let color = engine_color(engine, e);
        let bars = labels.iter().enumerate().filter_map(|(g, label)| {
            let m = find(engine, label)?;
            let x = g as f64 + 0.08 + e as f64 * bar_w;
            Some(Rectangle::new(
                [(x, lo), (x + bar_w * 0.92, m.ops_per_sec)],
                color.filled(),
            ))
        });
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(*engine)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let name_style = ("sans-serif", 15)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (g, label) in labels.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(g as f64 + 0.5, lo));
        let (name, threads) = match label.split_once(" x") {
            Some((n, t)) => (n.to_string(), Some(format!("{t} threads"))),
            None => (label.clone(), None),
        };
        root.draw(&Text::new(name, (px, py + 8), name_style.clone()))
            .map_err(err)?;
        if let Some(t) = threads {
            root.draw(&Text::new(t, (px, py + 26), name_style.clone()))
                .map_err(err)?;
        }
    }

    // Ratio to RocksDB, for the engines that are not RocksDB.
    let others: Vec<&str> = engines
        .iter()
        .copied()
        .filter(|e| *e != "rocksdb")
        .collect();
    let ratio_of = |engine: &str, label: &str| -> Option<f64> {
        let m = find(engine, label)?;
        let r = find("rocksdb", label)?;
        (r.ops_per_sec > 0.0).then(|| m.ops_per_sec / r.ops_per_sec)
    };
    let ratios: Vec<f64> = others
        .iter()
        .flat_map(|e| labels.iter().filter_map(move |l| ratio_of(e, l)))
        .collect();
    if ratios.is_empty() {
        root.present().map_err(err)?;
        return Ok(());
    }
    let (rlo, rhi) = log_range(ratios.iter().copied().chain([1.0]), 1.6);
    let mut chart = ChartBuilder::on(&bottom)
        .caption(
            "Ratio to RocksDB's ops/s in the same workload (above 1: faster than RocksDB)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(
            0.0..groups,
            (rlo..rhi).log_scale().with_key_points(log_ticks(rlo, rhi)),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(1)
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|v| format!("{v:.2}x"))
        .y_desc("ours / RocksDB")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            [(0.0, 1.0), (groups, 1.0)],
            BLACK.stroke_width(2),
        ))
        .map_err(err)?;
    let bar_w = 0.84 / others.len().max(1) as f64;
    let value_style = ("sans-serif", 12)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    let below_style = ("sans-serif", 12)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (e, engine) in others.iter().enumerate() {
        let index = engines.iter().position(|x| x == engine).unwrap_or(e);
        let color = engine_color(engine, index);
        for (g, label) in labels.iter().enumerate() {
            let Some(r) = ratio_of(engine, label) else {
                continue;
            };
            let x = g as f64 + 0.08 + e as f64 * bar_w;
            let (from, to) = if r >= 1.0 { (1.0, r) } else { (r, 1.0) };
            chart
                .draw_series([Rectangle::new(
                    [(x, from), (x + bar_w * 0.92, to)],
                    color.filled(),
                )])
                .map_err(err)?;
            // Above a bar that rises from 1, below one that hangs from it.
            let (end, dy, style) = if r >= 1.0 {
                (to, -2, value_style.clone())
            } else {
                (from, 2, below_style.clone())
            };
            let (px, py) = chart.backend_coord(&(x + bar_w * 0.46, end));
            root.draw(&Text::new(format!("{r:.2}"), (px, py + dy), style))
                .map_err(err)?;
        }
    }
    for (g, label) in labels.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(g as f64 + 0.5, rlo));
        root.draw(&Text::new(label.clone(), (px, py + 8), name_style.clone()))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Data-block reads per absent get against bits per key, with the lecture's
/// formula.
pub fn sweep(report: &Report, path: &Path) -> Result<()> {
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Data-block reads per absent get vs bits per key",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..21.0, (1e-5f64..2.0).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("bits per key")
        .y_desc("block reads per absent get")
        .y_label_formatter(&|v| format!("{v:.0e}"))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let formula = (1..=200).map(|i| {
        let b = i as f64 / 10.0;
        (
            b,
            bloomlsm_filter::math::optimal_false_positive_rate(b).max(1e-5),
        )
    });
    chart
        .draw_series(LineSeries::new(formula, BLACK))
        .map_err(err)?
        .label("lecture: 0.6185^(bits/key)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    let engines = distinct(report.sweep.iter().map(|p| p.engine.as_str()));
    for (i, engine) in engines.iter().enumerate() {
        let color = engine_color(engine, i);
        let points: Vec<(f64, f64)> = report
            .sweep
            .iter()
            .filter(|p| p.engine == *engine)
            .map(|p| (p.bits_per_key, p.reads_per_absent_get.max(1e-5)))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(*engine)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 4, color.filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// One line of a scale panel.
struct Line {
    name: String,
    color: RGBColor,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// One panel: `lines` against the number of keys, both axes log scale.
fn panel(
    area: &DrawingArea<SVGBackend, Shift>,
    title: &str,
    unit: &str,
    lines: &[Line],
) -> Result<()> {
    let (xlo, xhi) = log_range(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)), 1.4);
    let (ylo, yhi) = log_range(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)), 1.8);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 17))
        .margin(10)
        .x_label_area_size(34)
        .y_label_area_size(62)
        .build_cartesian_2d(
            (xlo..xhi).log_scale().with_key_points(log_ticks(xlo, xhi)),
            (ylo..yhi).log_scale().with_key_points(log_ticks(ylo, yhi)),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("keys in the store")
        .y_desc(unit)
        .x_label_formatter(&|v| human(*v))
        .y_label_formatter(&|v| human(*v))
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    for line in lines {
        let color = line.color;
        let pts: Vec<(f64, f64)> = line
            .points
            .iter()
            .copied()
            .filter(|p| p.1 > 0.0 && p.1.is_finite())
            .collect();
        let style = if line.dashed {
            color.stroke_width(2)
        } else {
            color.stroke_width(3)
        };
        let series = if line.dashed {
            chart.draw_series(DashedLineSeries::new(pts.clone(), 6, 4, style))
        } else {
            chart.draw_series(LineSeries::new(pts.clone(), style))
        }
        .map_err(err)?;
        let dashed = line.dashed;
        series.label(line.name.clone()).legend(move |(x, y)| {
            if dashed {
                PathElement::new(vec![(x, y), (x + 8, y)], color.stroke_width(2))
            } else {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
            }
        });
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.5))
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(err)?;
    Ok(())
}

/// Every scale figure against the number of keys, one panel each.
pub fn scale(report: &ScaleReport, path: &Path) -> Result<()> {
    let engines = distinct(report.points.iter().map(|p| p.engine.as_str()));
    type Pick = fn(&ScalePoint) -> f64;
    /// Title, unit, and two (name, figure) pairs: solid line, dashed line.
    type Panel = (&'static str, &'static str, [(&'static str, Pick); 2]);
    let panels: [Panel; 9] = [
        (
            "Gets per second",
            "ops/s",
            [
                ("present", |p| p.readrandom.ops_per_sec),
                ("absent", |p| p.readmissing.ops_per_sec),
            ],
        ),
        (
            "p99 get latency",
            "microseconds",
            [
                ("present", |p| p.readrandom.p99_us),
                ("absent", |p| p.readmissing.p99_us),
            ],
        ),
        (
            "Data-block reads per get",
            "block reads / get",
            [
                ("present", |p| p.readrandom.block_reads_per_op),
                ("absent", |p| p.readmissing.block_reads_per_op),
            ],
        ),
        (
            "Bytes read from storage per get",
            "bytes / get",
            [
                ("present", |p| p.readrandom.device_bytes_per_op),
                ("absent", |p| p.readmissing.device_bytes_per_op),
            ],
        ),
        (
            "Filter and index memory per key",
            "bytes / key",
            [
                ("filter", |p| p.facts.filter_bytes_per_key),
                ("index", |p| p.facts.index_bytes_per_key),
            ],
        ),
        (
            "Resident memory after reads",
            "bytes",
            [
                ("VmRSS", |p| p.memory_after_reads.rss_bytes as f64),
                ("filters+indexes+caches", |p| {
                    p.filter_index_bytes() + p.configured_cache_bytes as f64
                }),
            ],
        ),
        (
            "Write amplification (flush+compaction / user)",
            "x",
            [
                ("write amp", |p| p.facts.write_amplification),
                ("", |_| f64::NAN),
            ],
        ),
        (
            "Space amplification (disk / user bytes)",
            "x",
            [
                ("space amp", |p| p.facts.space_amplification),
                ("", |_| f64::NAN),
            ],
        ),
        (
            "Fill time (load and settle)",
            "seconds",
            [("fill", |p| p.fill.seconds), ("", |_| f64::NAN)],
        ),
    ];
    let root = SVGBackend::new(path, (1500, 1250)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (head, body) = root.split_vertically(40);
    head.draw(&Text::new(
        format!(
            "How each figure grows with the store (log-log; direct I/O {}; solid and dashed: the two figures named)",
            if report.points.first().is_some_and(|p| p.direct_io) {
                "on"
            } else {
                "off"
            }
        ),
        (20, 10),
        ("sans-serif", 20).into_font(),
    ))
    .map_err(err)?;
    let areas = body.split_evenly((3, 3));
    for (area, (title, unit, figures)) in areas.iter().zip(panels.iter()) {
        let mut lines = Vec::new();
        for (i, engine) in engines.iter().enumerate() {
            let pts = report.of(engine);
            for (f, (name, pick)) in figures.iter().enumerate() {
                if name.is_empty() {
                    continue;
                }
                lines.push(Line {
                    name: format!("{engine} {name}"),
                    color: engine_color(engine, i),
                    dashed: f == 1,
                    points: pts.iter().map(|p| (p.keys as f64, pick(p))).collect(),
                });
            }
        }
        panel(area, title, unit, &lines)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

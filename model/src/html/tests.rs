use super::time_bar::{segments, REST};
use super::*;
use crate::compare::compare;
use crate::report::fixtures::full_report;
use crate::report::StackSample;
use std::path::PathBuf;

/// The real lab reports in `examples/`.
fn examples() -> Vec<(String, Report)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut reports: Vec<(String, Report)> = std::fs::read_dir(&dir)
        .expect("examples/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable");
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, Report::from_json(&text).expect("a report"))
        })
        .collect();
    reports.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(reports.len() >= 3, "expected the three load reports");
    reports
}

/// The part of `page` from the section of row `key` to its end.
fn section<'p>(page: &'p str, key: &str) -> &'p str {
    let attribute = format!("data-device=\"{}\"", escape(key));
    let start = page
        .match_indices("<section class=\"device\"")
        .map(|(i, _)| i)
        .find(|&i| {
            page[i..]
                .split_once('>')
                .is_some_and(|(tag, _)| tag.contains(&attribute))
        })
        .unwrap_or_else(|| panic!("no section for {key}"));
    let end = start + page[start..].find("</section>").expect("closed");
    &page[start..end]
}

#[test]
fn escape_replaces_every_character_html_gives_a_meaning() {
    assert_eq!(
        escape(r#"<a href="x">Tom & 'Jerry'</a>"#),
        "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
    );
    assert_eq!(
        escape("dma_map_page_attrs ← nvme_queue_rq"),
        "dma_map_page_attrs ← nvme_queue_rq"
    );
}

/// Device names, driver names and call-path frames come from the machine measured: none of them
/// may open a tag in the page.
#[test]
fn strings_from_a_report_are_escaped_everywhere() {
    let mut report = full_report();
    let evil = "<script>alert('x')</script>";
    let key = report.devices[0].key.clone();
    report.devices[0].names.push(evil.into());
    report.devices[0].driver = Some("\"><img src=x>".into());
    report.warnings.push(evil.into());
    report.run.command = vec!["sh".into(), "-c".into(), evil.into()];
    report.stacks.push(StackSample {
        device: key.clone(),
        op: iommutop_abi::Op::DmaMap,
        samples: 3,
        total_ns: 3000,
        frames: vec!["a<b>&c".into(), evil.into()],
    });
    let page = render_report(&report, "<r>.json");
    assert!(!page.contains("<script"), "{page}");
    assert!(!page.contains("<img"), "{page}");
    assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    assert!(page.contains("a&lt;b&gt;&amp;c"));
    assert!(page.contains("&lt;r&gt;.json"));
}

#[test]
fn the_time_bar_of_every_row_sums_to_100_percent() {
    let mut rows = full_report().devices;
    for (_, report) in examples() {
        rows.extend(report.devices);
    }
    let mut drawn = 0;
    for d in &rows {
        let bar = segments(&d.derived);
        if d.derived.translation_ns.is_none() {
            assert!(bar.is_empty(), "{}", d.key);
            continue;
        }
        drawn += 1;
        let sum: f64 = bar.iter().map(|s| s.share).sum();
        assert!((sum - 1.0).abs() < 1e-9, "{}: {bar:?} sums to {sum}", d.key);
        assert!(bar.iter().all(|s| s.share >= 0.0), "{}: {bar:?}", d.key);
    }
    assert!(drawn > 10, "only {drawn} rows had a bar");
}

#[test]
fn a_nested_part_is_taken_out_of_its_parent_and_the_rest_is_its_own_segment() {
    let mut derived = crate::derive::Derived {
        translation_ns: Some(1000),
        ..Default::default()
    };
    derived.of_which = [
        (Op::DmaMap, 0.7),
        (Op::DmaUnmap, 0.3),
        (Op::IommuMap, 0.2),
        (Op::IotlbSync, 0.05),
        (Op::IovaAlloc, 0.1),
    ]
    .into_iter()
    .collect();
    let bar = segments(&derived);
    let share = |op: Option<Op>| {
        bar.iter()
            .find(|s| s.op == op)
            .map(|s| s.share)
            .unwrap_or_else(|| panic!("{op:?} not in {bar:?}"))
    };
    assert!((share(Some(Op::IommuMap)) - 0.15).abs() < 1e-12);
    assert!((share(Some(Op::IotlbSync)) - 0.05).abs() < 1e-12);
    assert!((share(Some(Op::IovaAlloc)) - 0.1).abs() < 1e-12);
    assert!((share(None) - 0.7).abs() < 1e-12);
    assert_eq!(bar.last().map(|s| s.label), Some(REST));
}

/// Parts that add up to more than the whole (calls that did not nest as assumed) are scaled to
/// it: the bar still ends at 100%, with no remainder.
#[test]
fn parts_beyond_the_whole_are_scaled_to_it() {
    let mut derived = crate::derive::Derived {
        translation_ns: Some(1000),
        ..Default::default()
    };
    derived.of_which = [
        (Op::IommuMap, 0.3),
        (Op::IotlbSync, 0.6),
        (Op::IommuUnmap, 0.5),
        (Op::IovaFree, 0.4),
    ]
    .into_iter()
    .collect();
    let bar = segments(&derived);
    let sum: f64 = bar.iter().map(|s| s.share).sum();
    assert!((sum - 1.0).abs() < 1e-9, "{bar:?}");
    assert!(bar.iter().all(|s| s.op.is_some()), "{bar:?}");
}

#[test]
fn every_timed_operation_with_a_histogram_gets_one_chart() {
    for (name, report) in examples() {
        let page = render_report(&report, &name);
        for d in report
            .devices
            .iter()
            .filter(|d| d.ops.values().any(|s| s.count > 0))
        {
            let part = section(&page, &d.key.to_string());
            for op in Op::ALL {
                let has_hist = d
                    .ops
                    .get(&op)
                    .and_then(|s| s.latency.as_ref())
                    .is_some_and(|l| !l.hist.is_empty());
                let charts = part
                    .matches(&format!("<figure data-op=\"{}\"><svg", op.name()))
                    .count();
                assert_eq!(
                    charts,
                    usize::from(has_hist),
                    "{name} {} {}",
                    d.key,
                    op.name()
                );
            }
        }
    }
}

/// The page must open where there is no network: nothing it references is fetched.
#[test]
fn the_page_fetches_nothing() {
    let reports = examples();
    let mut pages: Vec<String> = reports
        .iter()
        .map(|(name, report)| render_report(report, name))
        .collect();
    let (a, b) = (&reports[0].1, &reports[2].1);
    pages.push(render_comparison(
        a,
        b,
        &compare(a, b),
        ("a.json", "b.json"),
    ));
    for page in &pages {
        let lower = page.to_lowercase();
        for needle in [
            "src=\"http",
            "href=\"http",
            "src='http",
            "href='http",
            "url(",
            "@import",
            "<script",
            "<link",
            "<img",
            "<iframe",
            "<object",
        ] {
            assert!(!lower.contains(needle), "the page has `{needle}`");
        }
        // Links only to the page's own sections.
        for (i, _) in lower.match_indices("href=\"") {
            assert!(lower[i + 6..].starts_with('#'), "{}", &lower[i..i + 40]);
        }
    }
}

#[test]
fn the_overview_has_each_rows_dma_map_count() {
    for (name, report) in examples() {
        let page = render_report(&report, &name);
        for d in report
            .devices
            .iter()
            .filter(|d| d.ops.values().any(|s| s.count > 0))
        {
            let row = format!("<tr data-device=\"{}\">", escape(&d.key.to_string()));
            let start = page
                .find(&row)
                .unwrap_or_else(|| panic!("{name}: no row {}", d.key));
            let end = start + page[start..].find("</tr>").expect("closed");
            let cell = format!(
                "<td class=\"num\" data-field=\"dma_map\">{}</td>",
                d.op(Op::DmaMap).count
            );
            assert!(page[start..end].contains(&cell), "{name} {}", d.key);
            for n in &d.names {
                assert!(
                    page[start..end].contains(&escape(n)),
                    "{name} {} {n}",
                    d.key
                );
            }
        }
    }
}

/// `compare --html` draws A and B on the same chart for an operation timed in both.
#[test]
fn a_comparison_overlays_a_and_b_on_each_latency_chart() {
    let reports = examples();
    let (a, b) = (&reports[0].1, &reports[2].1);
    let comparison = compare(a, b);
    let page = render_comparison(a, b, &comparison, ("a.json", "b.json"));
    assert!(page.contains("<h2>Findings</h2>"));
    for finding in &comparison.findings {
        assert!(
            page.contains(&escape(&finding.headline)),
            "{}",
            finding.headline
        );
    }
    let nvme = section(&page, "0000:00:04.0");
    let start = nvme
        .find("<figure data-op=\"dma_map\">")
        .expect("dma_map chart");
    let chart = &nvme[start..start + nvme[start..].find("</figure>").expect("closed")];
    let (blue, orange) = ("#1F77B4", "#E66A00");
    assert!(
        chart.contains(blue) && chart.contains(orange),
        "not both A and B"
    );
    assert!(chart.contains("A: ") && chart.contains("B: "), "{chart}");
    // Rates side by side: one chart per quantity, a line for each side.
    let rates = nvme.find("dma_map/s").expect("rates chart");
    assert!(nvme[rates..].contains(blue) && nvme[rates..].contains(orange));
}

/// The page says what the text says: the text of `compare` shows the time a device's DMA calls
/// spent switched out (waiting) in its finding and under the device; the page showed neither under
/// the device.
#[test]
fn a_comparison_with_waiting_shows_its_finding_and_each_sides_figure() {
    let reports = examples();
    let a = &reports
        .iter()
        .find(|(name, _)| name.contains("preempt_full"))
        .expect("the 6.12 preempt=full load cell")
        .1;
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cli/tests/fixtures/load-6.12-rt-amd-waiting.json");
    let b = Report::from_json(&std::fs::read_to_string(path).expect("readable")).expect("a report");
    let comparison = compare(a, &b);
    let page = render_comparison(a, &b, &comparison, ("a.json", "rt.json"));
    let waiting: Vec<_> = comparison
        .findings
        .iter()
        .filter(|f| f.kind == crate::compare::FindingKind::Waiting)
        .collect();
    assert!(!waiting.is_empty(), "the rt run's NVMe waited");
    let findings = &page[page.find("<h2>Findings</h2>").expect("findings")..];
    for finding in waiting {
        assert!(
            findings.contains(&escape(&finding.headline)),
            "{}",
            finding.headline
        );
    }
    for change in &comparison.devices {
        let section = section(&page, &change.key);
        let waited = |w: &Option<crate::compare::DeviceWork>| {
            w.as_ref()
                .and_then(|w| w.dma_offcpu_ns)
                .is_some_and(|ns| ns > 0.0)
        };
        if !waited(&change.a) && !waited(&change.b) {
            assert!(!section.contains("class=\"waiting\""), "{}", change.key);
            continue;
        }
        let figure = |w: &Option<crate::compare::DeviceWork>| {
            w.as_ref()
                .map_or("-".into(), crate::compare::explain::waiting_figure)
        };
        for (side, w) in [("a", &change.a), ("b", &change.b)] {
            let cell = format!(
                "<td class=\"num\" data-side=\"{side}\">{}</td>",
                escape(&figure(w))
            );
            assert!(section.contains(&cell), "{}: no {cell}", change.key);
        }
    }
    let nvme = section(&page, "0000:00:04.0");
    assert!(nvme.contains("class=\"waiting\""), "the NVMe waited 63.5%");
    // Reports without waiting get no such table: two lab reports written before waiting was
    // measured (the examples of this build all measure it).
    let fixture = |name: &str| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/fixtures")
            .join(name);
        Report::from_json(&std::fs::read_to_string(path).expect("readable")).expect("a report")
    };
    let (plain_a, plain_b) = (
        &fixture("tcp-rr-intel-6.1.json"),
        &fixture("tcp-rr-intel-6.12.json"),
    );
    let plain = render_comparison(plain_a, plain_b, &compare(plain_a, plain_b), ("a", "b"));
    assert!(!plain.contains("class=\"waiting\""));
}

/// The calls not seen whole are a table of their own, shown when any figure is not 0.
#[test]
fn a_report_with_calls_not_seen_whole_shows_them() {
    let report = full_report();
    let page = render_report(&report, "r.json");
    assert!(page.contains("<h2>Calls not seen whole</h2>"), "{page}");
    assert!(page.contains(
        "<tr data-op=\"iommu_map\"><td>iommu_map</td><td class=\"num\">4000</td>\
         <td class=\"num\" data-field=\"untimed\">–</td>\
         <td class=\"num\" data-field=\"lost\">3</td>\
         <td class=\"num\" data-field=\"open_at_end\">0</td></tr>"
    ));
    assert!(page.contains("The 2 lost calls of dma_map and dma_unmap are one figure"));
    let mut exact = report;
    exact.losses = Some(crate::losses::Losses::default());
    assert!(!render_report(&exact, "r.json").contains("Calls not seen whole"));
}

/// The keys of the rows of the page's overview, then of its sections, in page order.
fn overview_and_section_keys(page: &str) -> (Vec<&str>, Vec<&str>) {
    let keys = |marker: &str| -> Vec<&str> {
        page.match_indices(marker)
            .filter_map(|(i, _)| {
                let rest = &page[i..];
                let start = rest.find("data-device=\"")? + "data-device=\"".len();
                let end = start + rest[start..].find('"')?;
                Some(&rest[start..end])
            })
            .collect()
    };
    (keys("<tr data-device="), keys("<section class=\"device\""))
}

/// Rows go by DMA maps, most first, so that a VF with 4000 maps would lead and its PF with 300
/// come last: the PF comes first, its VFs right under it, marked as such.
#[test]
fn vfs_are_listed_under_their_pf_in_the_overview_and_the_sections() {
    let page = render_report(&crate::report::fixtures::sriov_report(), "sriov.json");
    let expected = [
        "0000:00:02.0",
        "0000:00:0d.0",
        "0000:00:0c.0",
        "0000:00:1c.4",
        "0000:00:1c.0",
        "0000:00:1c.2",
        "deferred",
    ];
    let (overview, sections) = overview_and_section_keys(&page);
    assert_eq!(overview, expected, "{page}");
    assert_eq!(sections, expected, "{page}");
    for vf in ["0000:00:1c.0", "0000:00:1c.2", "0000:00:1c.4"] {
        assert!(
            page.contains(&format!(
                "<tr data-device=\"{vf}\" class=\"vf\" data-physfn=\"0000:00:0c.0\"><td class=\"vf\">"
            )),
            "{vf}: {page}"
        );
        assert!(
            section(&page, vf).contains("SR-IOV virtual function of 0000:00:0c.0"),
            "{vf}"
        );
    }
    assert!(
        page.contains("<tr data-device=\"0000:00:0c.0\"><td><a"),
        "{page}"
    );
    assert!(!section(&page, "0000:00:0c.0").contains("virtual function"));
    assert_eq!(
        page.matches("<span class=\"vf-of\">VF of 0000:00:0c.0</span>")
            .count(),
        3
    );
}

/// A report without VFs has neither the marks nor the attributes.
#[test]
fn rows_without_vfs_are_not_marked() {
    let page = render_report(&full_report(), "full.json");
    assert!(!page.contains("data-physfn"), "{page}");
    assert!(!page.contains("VF of"), "{page}");
}

//! Whole screens on ratatui's TestBackend, compared with stored insta snapshots
//! (`tests/snapshots/`), at 80×24 (the smallest supported) and 120×40, from intervals built
//! the way the sampler builds them (see `fixtures`). Review changes with `cargo insta review`
//! or by reading the `.snap.new` files insta writes next to the stored ones.

mod fixtures;

use fixtures::*;
use iommutop_model::sample::{Health, Op};
use iommutop_model::snapshot::Snapshot;
use iommutop_tui::{render, update, Action, HostSummary, Key, State, WorkloadEvent, WorkloadView};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Modifier;
use ratatui::Terminal;
use std::time::Duration;

fn draw(state: &State, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    terminal.draw(|frame| render(state, frame)).expect("draws");
    terminal
}

fn text(terminal: &Terminal<TestBackend>) -> String {
    terminal.backend().to_string()
}

fn press(state: &mut State, keys: &[Key]) {
    for &key in keys {
        update(state, Action::Key(key));
    }
}

/// The row of the buffer that contains `needle`.
fn line_with(buffer: &Buffer, needle: &str) -> Option<u16> {
    (0..buffer.area.height).find(|&y| {
        let line: String = (0..buffer.area.width)
            .map(|x| buffer[(x, y)].symbol())
            .collect();
        line.contains(needle)
    })
}

#[test]
fn empty_before_the_first_interval() {
    let state = State::new(
        HostSummary::from_facts(&host_facts()),
        lab_probes(),
        Duration::from_secs(1),
    );
    insta::assert_snapshot!("waiting_80x24", text(&draw(&state, 80, 24)));
}

#[test]
fn empty_no_dma_yet() {
    let state = state_after(lab_probes(), vec![Snapshot::default()]);
    insta::assert_snapshot!("empty_80x24", text(&draw(&state, 80, 24)));
    insta::assert_snapshot!("empty_120x40", text(&draw(&state, 120, 40)));
}

#[test]
fn busy_nvme_screen() {
    let state = state_after(lab_probes(), busy_nvme(40));
    insta::assert_snapshot!("nvme_120x40", text(&draw(&state, 120, 40)));
}

#[test]
fn busy_nvme_screen_narrow() {
    let state = state_after(lab_probes(), busy_nvme(40));
    let terminal = draw(&state, 80, 24);
    let screen = text(&terminal);
    insta::assert_snapshot!("nvme_80x24", screen);
    // Nothing spills past the right edge: every line is exactly 80 cells.
    assert_eq!(terminal.backend().buffer().area.width, 80);
    assert!(screen.contains("nvme0n1"));
}

/// Waiting inside translation is named under the table, apart from CPU% and NS/IO,
/// which stay on-CPU (the same cells as `nvme_80x24`).
#[test]
fn waiting_inside_translation_is_named_under_the_table() {
    let state = state_after(lab_probes(), waiting_nvme(40));
    let screen = text(&draw(&state, 80, 24));
    insta::assert_snapshot!("nvme_waiting_80x24", screen);
    assert!(
        screen.contains("waiting: 0000:00:04.0 75.0% of DMA time switched out, not in CPU%"),
        "{screen}"
    );
    let plain = text(&draw(&state_after(lab_probes(), busy_nvme(40)), 80, 24));
    let table = |screen: &str| {
        screen
            .lines()
            .skip(1)
            .take(6)
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        table(&screen)[..5],
        table(&plain)[..5],
        "the cells do not change"
    );
}

#[test]
fn busy_nic_pair_screen() {
    let mut state = state_after(lab_probes(), busy_nic_pair(40));
    // The second NIC selected: its histograms in the detail pane.
    press(&mut state, &[Key::Down]);
    insta::assert_snapshot!("nic_pair_120x40", text(&draw(&state, 120, 40)));
    insta::assert_snapshot!("nic_pair_80x24", text(&draw(&state, 80, 24)));
}

#[test]
fn counted_only_tiers_show_dashes_and_say_why() {
    let state = state_after(tracepoint_probes(), counted_only_nvme(10));
    let screen = text(&draw(&state, 120, 40));
    insta::assert_snapshot!("tracepoint_only_120x40", screen);
    assert!(screen.contains("not timed (tracepoint)"), "{screen}");
}

#[test]
fn help_overlay() {
    let mut state = state_after(lab_probes(), busy_nvme(40));
    press(&mut state, &[Key::Char('?')]);
    insta::assert_snapshot!("help_80x24", text(&draw(&state, 80, 24)));
    insta::assert_snapshot!("help_120x40", text(&draw(&state, 120, 40)));
}

#[test]
fn paused_and_filtered() {
    let mut state = state_after(lab_probes(), busy_nic_pair(20));
    press(
        &mut state,
        &[
            Key::Char('p'),
            Key::Char('/'),
            Key::Char('e'),
            Key::Char('t'),
            Key::Char('h'),
            Key::Char('1'),
        ],
    );
    insta::assert_snapshot!("paused_filtering_80x24", text(&draw(&state, 80, 24)));
}

#[test]
fn profile_pane_beside_the_probe_view() {
    let mut state = state_after(lab_probes(), busy_nic_pair(40)).with_workload(WorkloadView::new(
        "tcp-rr-1k",
        "netperf",
        Some(Duration::from_secs(60)),
    ));
    update(
        &mut state,
        Action::Workload(WorkloadEvent::Live(serde_json::json!({
            "transactions_per_s": 1456.3,
            "mean_latency_us": 686.7,
        }))),
    );
    update(
        &mut state,
        Action::Workload(WorkloadEvent::Note(
            "netserver listening on 10.77.0.2".into(),
        )),
    );
    insta::assert_snapshot!("profile_120x40", text(&draw(&state, 120, 40)));
    insta::assert_snapshot!("profile_80x24", text(&draw(&state, 80, 24)));
    update(
        &mut state,
        Action::Workload(WorkloadEvent::Finished("1456 transactions/s".into())),
    );
    let screen = text(&draw(&state, 120, 40));
    assert!(screen.contains("finished: 1456 transactions/s"), "{screen}");
    assert!(screen.contains("100%"), "{screen}");
}

#[test]
fn the_selected_row_is_highlighted_and_follows_the_keys() {
    let mut state = state_after(lab_probes(), busy_nic_pair(5));
    let terminal = draw(&state, 120, 40);
    let buffer = terminal.backend().buffer();
    let first = line_with(buffer, "0000:00:05.0").expect("eth0 row");
    let second = line_with(buffer, "0000:00:06.0").expect("eth1 row");
    // eth1 maps more (its fixture runs 20% slower, same rate): rows sort by maps/s, then key.
    let selected_row =
        |buffer: &Buffer, y: u16| buffer[(2, y)].modifier.contains(Modifier::REVERSED);
    assert!(selected_row(buffer, first.min(second)));
    assert!(!selected_row(buffer, first.max(second)));
    press(&mut state, &[Key::Down]);
    let terminal = draw(&state, 120, 40);
    let buffer = terminal.backend().buffer();
    assert!(selected_row(buffer, first.max(second)));
}

#[test]
fn every_size_down_to_80x24_renders_without_panicking() {
    let mut state = state_after(lab_probes(), busy_nic_pair(30)).with_workload(WorkloadView::new(
        "tcp-rr-1k",
        "netperf",
        None,
    ));
    for (w, h) in [
        (80, 24),
        (81, 25),
        (100, 30),
        (200, 60),
        (40, 10),
        (20, 5),
        (1, 1),
    ] {
        draw(&state, w, h);
        press(&mut state, &[Key::Char('?')]);
        draw(&state, w, h);
        press(&mut state, &[Key::Esc, Key::Char('d')]);
        draw(&state, w, h);
        press(&mut state, &[Key::Char('d')]);
    }
}

#[test]
fn many_devices_scroll_to_keep_the_selection_visible() {
    let mut snapshot = busy_nic_pair(2).pop().expect("a snapshot");
    let template = snapshot.devices[0].clone();
    for i in 0..30 {
        let mut device = template.clone();
        device.key = format!("0000:01:{i:02x}.0").into();
        snapshot.devices.push(device);
    }
    let mut state = state_after(lab_probes(), vec![snapshot]);
    press(&mut state, &[Key::End]);
    let terminal = draw(&state, 80, 24);
    let selected = state.selected_device().expect("selected").key.to_string();
    let buffer = terminal.backend().buffer();
    let y = line_with(buffer, &selected).expect("selected row drawn");
    assert!(buffer[(2, y)].modifier.contains(Modifier::REVERSED));
}

/// Calls no program saw, and calls counted but untimed: the footer says how many, so that a
/// count or a latency missing calls is never shown as if complete. Health counters that lost
/// nothing (a frame abandoned and closed again) say nothing.
#[test]
fn lost_and_untimed_calls_show_in_the_footer() {
    let mut snapshots = busy_nvme(2);
    let last = snapshots.last_mut().expect("a snapshot");
    last.entry_groups.push(iommutop_model::sample::EntryGroup {
        programs: vec!["fentry__dma_map_page_attrs".into()],
        ops: vec![Op::DmaMap],
        skipped: 15,
    });
    let nvme = last
        .devices
        .iter_mut()
        .find(|d| d.key == "0000:00:04.0")
        .expect("the NVMe row");
    let map = nvme.ops.get_mut(&Op::DmaMap).expect("NVMe maps");
    let latency = map.latency.as_mut().expect("timed maps");
    let untimed = map.count / 100;
    latency.timed = map.count - untimed;
    let state = state_after(lab_probes(), snapshots);
    let screen = text(&draw(&state, 120, 40));
    assert!(screen.contains("⚠ 15 calls lost"), "{screen}");
    assert!(screen.contains("dma_map 1.00% untimed"), "{screen}");

    let mut only_health = busy_nvme(2);
    let last = only_health.last_mut().expect("a snapshot");
    last.health.insert(Health::AbandonedFrames, 3);
    let screen = text(&draw(&state_after(lab_probes(), only_health), 120, 40));
    assert!(
        !screen.contains("lost") && !screen.contains("untimed"),
        "{screen}"
    );
}

/// `--pid`/`--cgroup`: the header says whose work alone is counted.
#[test]
fn a_task_filter_is_named_in_the_header() {
    let filter = iommutop_model::TaskFilter {
        pid: Some(4242),
        comm: Some("qemu".into()),
        ..Default::default()
    };
    let state = State::new(
        HostSummary::from_facts(&host_facts()).with_scope(Some(&filter)),
        lab_probes(),
        Duration::from_secs(1),
    );
    let terminal = draw(&state, 160, 24);
    let buffer = terminal.backend().buffer();
    assert_eq!(
        line_with(buffer, "only process 4242 (qemu), task context"),
        Some(0),
        "{}",
        text(&terminal)
    );
}

/// The server machine's fourteen rows at 80 and at 200 columns: every row shown, sorted by
/// MAPS/s, the totals line under them summing the shown rows' rates, no figure cut short, and
/// a process's long key whole where the room allows.
#[test]
fn a_server_s_rows_stay_sorted_whole_and_totalled_at_80_and_200_columns() {
    let snapshots = busy_server(12);
    let last = snapshots.last().expect("a snapshot").clone();
    assert!(last.devices.len() >= 12, "{} rows", last.devices.len());
    let mut by_maps: Vec<(f64, String)> = last
        .devices
        .iter()
        .map(|d| (d.op(Op::DmaMap).rate_per_s, d.key.to_string()))
        .collect();
    by_maps.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let expected: Vec<&str> = by_maps.iter().map(|(_, key)| key.as_str()).collect();
    let total_maps: f64 = by_maps.iter().map(|(rate, _)| rate).sum();

    let state = state_after(lab_probes(), snapshots);
    for (width, height) in [(80, 40), (200, 50)] {
        let screen = text(&draw(&state, width, height));
        insta::assert_snapshot!(format!("server_{width}x{height}"), screen);
        let lines: Vec<&str> = screen
            .lines()
            .map(|l| l.trim_matches('"').trim_matches('│'))
            .collect();
        let header = lines
            .iter()
            .position(|l| l.starts_with("DEVICE"))
            .expect("the table's header");
        let rows: Vec<&str> = lines[header + 1..]
            .iter()
            .take_while(|l| !l.starts_with("total"))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        // Each row is the expected device's, its key whole where the room allows (at 200
        // columns every key is), else cut with `…` (text, never a figure).
        assert_eq!(rows.len(), expected.len(), "{width} columns:\n{screen}");
        for (shown, key) in rows.iter().zip(&expected) {
            let cut = shown
                .strip_suffix('…')
                .is_some_and(|start| width < 200 && key.starts_with(start));
            assert!(
                shown == key || cut,
                "{width} columns: {shown} for {key}:\n{screen}"
            );
        }
        let totals = lines[header + 1 + rows.len()];
        assert!(
            totals.contains(&iommutop_tui::format::rate(total_maps)),
            "{width} columns: totals {totals:?} without {total_maps} maps/s"
        );
        for line in &lines[header..=header + 1 + rows.len()] {
            let figures = line.split_whitespace().skip(1);
            assert!(
                figures.clone().all(|cell| !cell.contains('…')),
                "{width} columns, a cell cut: {line:?}"
            );
        }
    }
}

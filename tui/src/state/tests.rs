use super::*;
use iommutop_model::snapshot::OpStats;
use iommutop_model::RowKind;

fn device(key: &str, driver: &str, maps_per_s: f64, cpu: Option<f64>) -> Device {
    let mut ops = std::collections::BTreeMap::new();
    ops.insert(
        Op::DmaMap,
        OpStats {
            count: maps_per_s as u64,
            rate_per_s: maps_per_s,
            ..OpStats::default()
        },
    );
    Device {
        key: key.into(),
        kind: RowKind::Pci,
        pci_address: key.parse().ok(),
        driver: Some(driver.to_string()),
        names: vec![format!("{driver}0")],
        iommu_group: None,
        domain_type: Some("DMA-FQ".into()),
        iommu_unit: None,
        physfn: None,
        ops,
        completions: 0,
        derived: iommutop_model::Derived {
            cpu_share: cpu,
            ..Default::default()
        },
        pid: None,
        dma_map_directions: Default::default(),
    }
}

fn snapshot(at_s: u64, devices: Vec<Device>) -> Box<Snapshot> {
    Box::new(Snapshot {
        monotonic_ns: at_s * 1_000_000_000,
        interval_ns: 1_000_000_000,
        devices,
        ..Snapshot::default()
    })
}

fn three_devices(at_s: u64) -> Box<Snapshot> {
    snapshot(
        at_s,
        vec![
            device("0000:00:04.0", "nvme", 500.0, Some(0.02)),
            device("0000:00:05.0", "e1000e", 2_000.0, None),
            device("0000:00:06.0", "e1000e", 100.0, Some(0.05)),
        ],
    )
}

fn state() -> State {
    State::new(HostSummary::default(), vec![], Duration::from_secs(1))
}

fn keys(state: &mut State, keys: &[Key]) {
    for &k in keys {
        update(state, Action::Key(k));
    }
}

fn shown_keys(state: &State) -> Vec<String> {
    state.rows().iter().map(|d| d.key.to_string()).collect()
}

#[test]
fn rows_sort_by_maps_per_second_first_and_select_the_top_one() {
    let mut s = state();
    update(&mut s, Action::Sample(three_devices(1)));
    assert_eq!(
        shown_keys(&s),
        ["0000:00:05.0", "0000:00:04.0", "0000:00:06.0"]
    );
    assert_eq!(s.selected.as_deref(), Some("0000:00:05.0"));
}

#[test]
fn sorting_cycles_columns_reverses_and_puts_unmeasured_last() {
    let mut s = state();
    update(&mut s, Action::Sample(three_devices(1)));
    keys(&mut s, &[Key::Char('S')]); // the column before MAPS/s
    assert_eq!(s.sort, Column::Domain);
    s.set_sort(Column::Cpu);
    assert_eq!(
        shown_keys(&s),
        ["0000:00:06.0", "0000:00:04.0", "0000:00:05.0"]
    );
    keys(&mut s, &[Key::Char('r')]);
    // Ascending now, and the unmeasured row still last.
    assert_eq!(
        shown_keys(&s),
        ["0000:00:04.0", "0000:00:06.0", "0000:00:05.0"]
    );
    keys(&mut s, &[Key::Char('s')]);
    assert_eq!(s.sort, Column::Device);
    assert!(!s.descending, "text sorts A to Z first");
    assert_eq!(
        shown_keys(&s),
        ["0000:00:04.0", "0000:00:05.0", "0000:00:06.0"]
    );
}

#[test]
fn filtering_matches_key_driver_and_names_and_esc_clears_it() {
    let mut s = state();
    update(&mut s, Action::Sample(three_devices(1)));
    keys(
        &mut s,
        &[Key::Char('/'), Key::Char('N'), Key::Char('v'), Key::Enter],
    );
    assert_eq!(s.filter, "Nv");
    assert_eq!(shown_keys(&s), ["0000:00:04.0"]);
    assert_eq!(s.selected.as_deref(), Some("0000:00:04.0"));
    // In normal mode again: 'q' would quit, not type.
    assert_eq!(update(&mut s, Action::Key(Key::Char('/'))), Effect::None);
    keys(
        &mut s,
        &[
            Key::Backspace,
            Key::Backspace,
            Key::Char('0'),
            Key::Char('6'),
        ],
    );
    assert_eq!(shown_keys(&s), ["0000:00:06.0"]);
    keys(&mut s, &[Key::Esc]);
    assert_eq!(s.filter, "");
    assert_eq!(s.input, Input::Normal);
    assert_eq!(shown_keys(&s).len(), 3);
}

#[test]
fn a_view_started_sorted_and_filtered_shows_only_matching_rows_in_that_order() {
    let mut s = state().with_sort(Column::Cpu).with_filter("E1000");
    assert_eq!(s.sort_column(), Column::Cpu);
    assert!(s.sort_descending());
    assert_eq!(s.filter(), "E1000");
    assert_eq!(
        s.input(),
        Input::Normal,
        "keys are commands, not filter text"
    );
    update(&mut s, Action::Sample(three_devices(1)));
    assert_eq!(shown_keys(&s), ["0000:00:06.0", "0000:00:05.0"]);
    assert_eq!(s.selected.as_deref(), Some("0000:00:06.0"));
    // The start-up filter is an ordinary one: Esc clears it.
    keys(&mut s, &[Key::Esc]);
    assert_eq!(shown_keys(&s).len(), 3);
}

#[test]
fn a_text_column_given_at_start_up_sorts_a_to_z() {
    let mut s = state().with_sort(Column::Device);
    update(&mut s, Action::Sample(three_devices(1)));
    assert!(!s.sort_descending());
    assert_eq!(
        shown_keys(&s),
        ["0000:00:04.0", "0000:00:05.0", "0000:00:06.0"]
    );
}

#[test]
fn typing_q_in_the_filter_does_not_quit() {
    let mut s = state();
    keys(&mut s, &[Key::Char('/')]);
    assert_eq!(update(&mut s, Action::Key(Key::Char('q'))), Effect::None);
    assert_eq!(s.filter, "q");
    assert_eq!(update(&mut s, Action::Key(Key::Ctrl('c'))), Effect::Quit);
}

#[test]
fn selection_moves_clamps_and_follows_its_row_across_resorts() {
    let mut s = state();
    update(&mut s, Action::Sample(three_devices(1)));
    keys(&mut s, &[Key::Down]);
    assert_eq!(s.selected.as_deref(), Some("0000:00:04.0"));
    keys(&mut s, &[Key::Down, Key::Down, Key::Down]);
    assert_eq!(s.selected.as_deref(), Some("0000:00:06.0"));
    keys(&mut s, &[Key::Home]);
    assert_eq!(s.selected_index(), Some(0));
    keys(&mut s, &[Key::End, Key::PageUp]);
    assert_eq!(s.selected_index(), Some(0));
    keys(&mut s, &[Key::Down]);
    // The NVMe is selected; a new sample reorders rows, the selection stays on it.
    let mut reordered = three_devices(2);
    reordered.devices[0] = device("0000:00:04.0", "nvme", 9_000.0, None);
    update(&mut s, Action::Sample(reordered));
    assert_eq!(s.selected.as_deref(), Some("0000:00:04.0"));
    assert_eq!(s.selected_index(), Some(0));
}

#[test]
fn a_vanished_selection_falls_back_to_the_first_row() {
    let mut s = state();
    update(&mut s, Action::Sample(three_devices(1)));
    keys(&mut s, &[Key::End]);
    update(
        &mut s,
        Action::Sample(snapshot(2, vec![device("0000:00:04.0", "nvme", 1.0, None)])),
    );
    assert_eq!(s.selected.as_deref(), Some("0000:00:04.0"));
}

#[test]
fn pause_freezes_the_view_and_resume_catches_up_without_losing_history() {
    let mut s = state();
    update(&mut s, Action::Sample(three_devices(1)));
    keys(&mut s, &[Key::Char('p')]);
    assert!(s.is_paused());
    update(&mut s, Action::Sample(three_devices(2)));
    update(&mut s, Action::Sample(three_devices(3)));
    assert_eq!(s.snapshot().map(|x| x.monotonic_ns), Some(1_000_000_000));
    assert_eq!(s.samples(), 1);
    keys(&mut s, &[Key::Char(' ')]);
    assert!(!s.is_paused());
    assert_eq!(s.snapshot().map(|x| x.monotonic_ns), Some(3_000_000_000));
    assert_eq!(s.history.points(&"0000:00:04.0".into()).count(), 3);
}

#[test]
fn the_pause_backlog_is_bounded() {
    let mut s = state();
    keys(&mut s, &[Key::Char('p')]);
    for t in 1..=(BACKLOG as u64 + 50) {
        update(&mut s, Action::Sample(three_devices(t)));
    }
    assert_eq!(s.backlog.len(), BACKLOG);
    keys(&mut s, &[Key::Char('p')]);
    assert_eq!(
        s.snapshot().map(|x| x.monotonic_ns),
        Some((BACKLOG as u64 + 50) * 1_000_000_000)
    );
}

#[test]
fn plus_and_minus_step_the_interval_within_bounds() {
    let mut s = state();
    assert_eq!(
        update(&mut s, Action::Key(Key::Char('+'))),
        Effect::SetInterval(Duration::from_secs(2))
    );
    assert_eq!(
        update(&mut s, Action::Key(Key::Char('-'))),
        Effect::SetInterval(Duration::from_secs(1))
    );
    keys(&mut s, &[Key::Char('-'), Key::Char('-')]);
    assert_eq!(s.interval(), Duration::from_millis(250));
    assert_eq!(update(&mut s, Action::Key(Key::Char('-'))), Effect::None);
    // An interval given on the command line between the steps goes to the next step.
    let mut odd = State::new(HostSummary::default(), vec![], Duration::from_millis(1500));
    assert_eq!(
        update(&mut odd, Action::Key(Key::Char('+'))),
        Effect::SetInterval(Duration::from_secs(2))
    );
    let mut odd = State::new(HostSummary::default(), vec![], Duration::from_millis(1500));
    assert_eq!(
        update(&mut odd, Action::Key(Key::Char('-'))),
        Effect::SetInterval(Duration::from_secs(1))
    );
}

#[test]
fn help_swallows_keys_until_closed() {
    let mut s = state();
    keys(&mut s, &[Key::Char('?')]);
    assert!(s.help_shown());
    assert_eq!(update(&mut s, Action::Key(Key::Char('p'))), Effect::None);
    assert!(!s.is_paused());
    assert_eq!(update(&mut s, Action::Key(Key::Char('q'))), Effect::None);
    assert!(!s.help_shown());
    assert_eq!(update(&mut s, Action::Key(Key::Char('q'))), Effect::Quit);
}

#[test]
fn bpf_cost_per_event_comes_from_the_program_stats() {
    let mut s = state();
    let mut snap = three_devices(1);
    snap.events = 1_000;
    snap.programs.insert(
        "dma__map_page__fentry".into(),
        iommutop_model::snapshot::ProgramDelta {
            run_count: 500,
            run_time_ns: 40_000,
        },
    );
    snap.programs.insert(
        "dma__unmap_page__fentry".into(),
        iommutop_model::snapshot::ProgramDelta {
            run_count: 500,
            run_time_ns: 45_000,
        },
    );
    update(&mut s, Action::Sample(snap));
    assert_eq!(s.bpf_ns_per_event(), Some(85.0));
}

#[test]
fn workload_events_fill_the_pane() {
    let mut s = state().with_workload(WorkloadView::new(
        "tcp-rr-1k",
        "netperf",
        Some(Duration::from_secs(30)),
    ));
    update(
        &mut s,
        Action::Workload(WorkloadEvent::Live(
            serde_json::json!({"transactions_per_s": 1234.5}),
        )),
    );
    for i in 0..6 {
        update(
            &mut s,
            Action::Workload(WorkloadEvent::Note(format!("n{i}"))),
        );
    }
    update(&mut s, Action::Tick(Duration::from_secs(31)));
    update(
        &mut s,
        Action::Workload(WorkloadEvent::Finished("done".into())),
    );
    let view = s.workload().expect("pane");
    assert_eq!(view.notes.len(), NOTES);
    assert_eq!(view.notes.front().map(String::as_str), Some("n2"));
    assert_eq!(view.finished_at, Some(Duration::from_secs(31)));
    assert!(view.live.is_some());
}

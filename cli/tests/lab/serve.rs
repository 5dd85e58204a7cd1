//! Issue 14 in the lab: `iommutop serve` under a real Prometheus (Debian's package) scraping it
//! every second on loopback, while dd does 2000 direct 4 KiB reads of the NVMe. The guest side
//! is `cli/tests/lab/serve.sh`.

use crate::support::*;
use serde_json::Value;

#[test]
fn prometheus_stores_every_nvme_map_and_serve_detaches_on_sigint() {
    if lab_skipped("lab_serve") {
        return;
    }
    let out = run_guest_script("serve", &["--kernel", "6.12"], "serve.sh", &[]);
    let err = read(&out.join("serve.err"));
    assert_eq!(
        read(&out.join("ready.rc")).trim(),
        "0",
        "serve or Prometheus did not come up: {err}"
    );
    assert_eq!(
        read(&out.join("dd.rc")).trim(),
        "0",
        "{}",
        read(&out.join("dd.out"))
    );

    let nvme = read(&out.join("nvme.txt")).trim().to_string();
    let maps = read_json(&out.join("maps.json"));
    let results = maps["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(results.len(), 1, "one series for the NVMe: {maps}");
    let series = &results[0];
    assert_eq!(series["metric"]["device"], nvme.as_str());
    assert_eq!(series["metric"]["driver"], "nvme");
    let stored: f64 = series["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no value in {series}"));
    eprintln!("Prometheus: iommutop_dma_maps_total{{device=\"{nvme}\"}} = {stored}");
    assert!(stored >= 2000.0, "2000 reads, {stored} maps stored");

    let up = read_json(&out.join("up.json"));
    assert_eq!(
        up["data"]["result"][0]["value"][1],
        Value::from("1"),
        "{up}"
    );

    let scrape = read(&out.join("scrape.txt"));
    assert!(scrape.contains("iommutop_host_info{"), "{scrape}");
    assert!(
        scrape.contains("iommutop_dma_map_duration_seconds_bucket{"),
        "{scrape}"
    );
    assert_eq!(
        read(&out.join("promtool.rc")).trim(),
        "0",
        "promtool check metrics: {}",
        read(&out.join("promtool.out"))
    );

    assert_eq!(
        read(&out.join("serve.rc")).trim(),
        "0",
        "serve after SIGINT: {err}"
    );
    assert_eq!(
        read(&out.join("bpftool.rc")).trim(),
        "0",
        "bpftool prog show failed, so what is left attached is unknown: {}",
        read(&out.join("bpftool.err"))
    );
    assert_eq!(
        read(&out.join("progs-left.txt")).trim(),
        "",
        "programs left attached"
    );
    eprintln!(
        "promtool check metrics passed on a scrape of {} lines",
        scrape.lines().count()
    );
}

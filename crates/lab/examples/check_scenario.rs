//! Validate scenario files and print what they resolve to: `check_scenario FILE...`.
fn main() {
    let mut failed = false;
    for arg in std::env::args().skip(1) {
        match qfec_lab::Scenario::load(std::path::Path::new(&arg)) {
            Ok(s) => println!(
                "{arg}: ok: {} ({} seeds, workload {}, down {:?})",
                s.name,
                s.seeds.len(),
                s.workload,
                s.links.down.serializer
            ),
            Err(e) => {
                failed = true;
                println!("{e}");
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}

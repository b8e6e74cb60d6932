//! Renders sample plots to /tmp so their look can be checked by eye.
use corral_lab::plot::{BoxPlot, LineChart, Series};
fn main() {
    let c = LineChart::new(
        "Response time of a 5-member entity vs delay (seed 000 Fig. 7)",
        "delay between requests (ms)",
        "response time (s)",
    )
    .series(
        Series::new(
            "corral (sim)",
            vec![(0.0, 2.9), (25.0, 0.6), (50.0, 0.42), (100.0, 0.55), (200.0, 0.95), (300.0, 1.35), (500.0, 2.2)],
        )
        .with_errors(vec![
            (2.5, 3.3),
            (0.5, 0.7),
            (0.38, 0.46),
            (0.5, 0.6),
            (0.9, 1.0),
            (1.3, 1.4),
            (2.1, 2.3),
        ]),
    )
    .series(Series::new("paper (testbed)", vec![(0.0, 3.0), (50.0, 0.39), (100.0, 0.55)]))
    .band(82.0, 100.0, "Eq. (2)");
    std::fs::write("/tmp/line.svg", c.to_svg()).unwrap();
    let b = BoxPlot::new("Response times, office floor (seed 000 Fig. 16)", "response time (s)")
        .entry("unicast low", [1.02, 1.2, 1.5, 2.1, 4.53], 1.7)
        .entry("unicast normal", [2.91, 4.5, 6.8, 9.0, 13.87], 7.21)
        .entry("multicast low", [2.62, 4.2, 5.0, 5.6, 8.36], 4.92)
        .entry("multicast normal", [2.45, 4.1, 4.9, 5.4, 7.75], 4.79);
    std::fs::write("/tmp/box.svg", b.to_svg()).unwrap();
}

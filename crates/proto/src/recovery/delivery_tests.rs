//! Hand-worked traces of the delivery-rate sampler. Packets are 1000 bytes; times in ms.

use super::*;

fn at(ms: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(ms)
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Sends one 1000-byte packet with `in_flight` bytes in flight before it.
fn send(d: &mut DeliveryRate, t: u64, in_flight: u64) -> PacketDelivery {
    d.on_sent(at(t), 1000, in_flight + 1000)
}

#[test]
fn hand_worked_trace() {
    let mut d = DeliveryRate::new();
    // t=0: A and B leave into an empty pipe; t=10: C.
    let a = send(&mut d, 0, 0);
    let b = send(&mut d, 0, 1000);
    let c = send(&mut d, 10, 2000);
    assert_eq!(c.tx_in_flight, 3000);
    assert!(
        d.take_sample(at(50), ms(0), 3000).is_none(),
        "nothing delivered"
    );

    // t=100: one ACK for A and B. The newest is B (same send time, sent later).
    d.on_delivered(at(100), &a);
    d.on_delivered(at(100), &b);
    let rs = d.take_sample(at(100), ms(100), 1000).unwrap();
    // Flight from t=0 to t=0, acknowledged 100 ms after the knee at t=0: 2000 B / 100 ms.
    assert_eq!(rs.interval, ms(100));
    assert_eq!(rs.delivered, 2000);
    assert_eq!(rs.delivery_rate, 20_000);
    assert_eq!(rs.prior_delivered, 0);
    assert_eq!(rs.newly_acked, 2000);
    assert_eq!(rs.tx_in_flight, 2000);
    assert_eq!(rs.rtt, ms(100));
    assert_eq!(rs.send_time, at(0));
    assert_eq!((rs.total_delivered, rs.bytes_in_flight), (2000, 1000));
    assert!(!rs.is_app_limited);

    // t=150: D, with C still in flight; its snapshot starts at the last ACK's knee.
    let dd = send(&mut d, 150, 1000);
    assert_eq!((dd.delivered, dd.delivered_time), (2000, at(100)));
    assert_eq!(dd.first_send_time, at(0));

    // t=155: C is declared lost: 1000 B lost since its send, against 3000 B in flight then.
    let loss = d.on_lost(&c);
    assert_eq!(
        loss,
        LossSample {
            bytes: 1000,
            tx_in_flight: 3000,
            lost: 1000,
            is_app_limited: false,
            total_delivered: 2000,
        }
    );

    // t=160: D is acknowledged 10 ms after its send (ACK compression): the ACK interval since
    // the knee at t=100 is 60 ms, the flight's send interval (t=0 to 150) 150 ms; the longer
    // one counts, so the rate is not overestimated.
    d.on_delivered(at(160), &dd);
    let rs = d.take_sample(at(160), ms(100), 0).unwrap();
    assert_eq!(rs.interval, ms(150));
    assert_eq!(rs.delivered, 1000);
    assert_eq!(rs.delivery_rate, 6_666);
    assert_eq!(rs.newly_lost, 1000);
    // C was declared lost after D was sent.
    assert_eq!(rs.lost, 1000);
    assert_eq!(rs.prior_delivered, 2000);
    assert_eq!(rs.tx_in_flight, 2000);
    assert_eq!(rs.rtt, ms(10));
}

#[test]
fn short_interval_gives_no_rate() {
    let mut d = DeliveryRate::new();
    let a = send(&mut d, 0, 0);
    d.on_delivered(at(30), &a);
    let rs = d.take_sample(at(30), ms(40), 0).unwrap();
    assert_eq!(rs.interval, ms(30));
    assert_eq!(rs.delivery_rate, 0, "interval below min_rtt");
    assert_eq!(rs.newly_acked, 1000);
}

#[test]
fn app_limited_bubble_lasts_one_round() {
    let mut d = DeliveryRate::new();
    let a = send(&mut d, 0, 0);
    d.on_delivered(at(100), &a);
    d.take_sample(at(100), ms(100), 0).unwrap();
    // Out of data at t=100 with nothing in flight: the bubble ends once 1000 B more than now
    // (1000) are delivered.
    d.mark_app_limited(0);
    assert!(d.is_app_limited());
    let e = send(&mut d, 300, 0);
    let f = send(&mut d, 300, 1000);
    assert!(e.is_app_limited && f.is_app_limited);
    d.on_delivered(at(400), &e);
    let rs = d.take_sample(at(400), ms(100), 1000).unwrap();
    assert!(rs.is_app_limited);
    // 2000 delivered > 1000: the bubble has left the pipe.
    assert!(!d.is_app_limited());
    let g = send(&mut d, 400, 1000);
    assert!(!g.is_app_limited);
    d.on_delivered(at(410), &f);
    d.on_delivered(at(500), &g);
    let rs = d.take_sample(at(500), ms(100), 0).unwrap();
    assert!(!rs.is_app_limited, "the newest packet decides");
    assert_eq!(rs.newly_acked, 2000);
}

#[test]
fn late_packets_count_as_delivered_recovered_ones_as_acknowledged() {
    let mut d = DeliveryRate::new();
    let a = send(&mut d, 0, 0);
    let b = send(&mut d, 10, 1000);
    let c = send(&mut d, 20, 2000);
    d.on_lost(&a);
    // B recovered by the peer's FEC (mask mode) between ACKs: acknowledged in the next
    // sample, but its bytes crossed the path in repair packets, not as B.
    d.on_recovered(&b);
    assert!(d.take_sample(at(105), ms(100), 1000).is_none());
    // One ACK for C and, after all, A (declared lost earlier).
    d.on_delivered(at(120), &c);
    d.on_delivered(at(120), &a);
    let rs = d.take_sample(at(120), ms(100), 0).unwrap();
    assert_eq!(rs.newly_acked, 3000);
    assert_eq!(rs.total_delivered, 2000);
    assert_eq!(rs.newly_lost, 1000);
    // C is the newest, whatever the order of processing.
    assert_eq!(rs.send_time, at(20));
    assert_eq!(rs.prior_delivered, 0);
    assert_eq!(rs.delivered, 2000);
    // The knee was t=0, the ACK t=120: 2000 B / 120 ms.
    assert_eq!(rs.delivery_rate, 16_666);
}

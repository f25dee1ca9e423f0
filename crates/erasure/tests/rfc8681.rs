use qfec_erasure::tinymt::TinyMt32;

#[test]
fn print_vectors() {
    let mut g = TinyMt32::new(1);
    let v: Vec<u32> = (0..50).map(|_| g.next_u32()).collect();
    println!("{v:?}");
    let mut g = TinyMt32::new(1);
    let v: Vec<u8> = (0..50).map(|_| g.rand16()).collect();
    println!("{v:?}");
    let mut g = TinyMt32::new(1);
    let v: Vec<u8> = (0..50).map(|_| g.rand256()).collect();
    println!("{v:?}");
}

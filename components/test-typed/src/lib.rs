//! Test fixture: plain typed WIT exports (no `chitin:tool`), each handing its argument back, so
//! a call checks both conversions (JSON to component values and back) for every type kind.

wit_bindgen::generate!({ path: "wit", world: "test-typed" });

use exports::fixture::typed::kinds::{self, Access, Colour, Point, Shape};

struct Typed;

impl Guest for Typed {
    fn nothing() {}
}

impl kinds::Guest for Typed {
    fn echo_bool(v: bool) -> bool {
        v
    }
    #[allow(clippy::too_many_arguments)]
    fn echo_integers(
        a: i8,
        b: u8,
        c: i16,
        d: u16,
        e: i32,
        f: u32,
        g: i64,
        h: u64,
    ) -> (i8, u8, i16, u16, i32, u32, i64, u64) {
        (a, b, c, d, e, f, g, h)
    }
    fn echo_floats(a: f32, b: f64) -> (f32, f64) {
        (a, b)
    }
    fn echo_char(v: char) -> char {
        v
    }
    fn echo_string(v: String) -> String {
        v
    }
    fn echo_option(v: Option<u32>, _w: Vec<Option<String>>) -> Option<u32> {
        v
    }
    fn echo_record(p: Point) -> Point {
        p
    }
    fn echo_variant(v: Shape) -> Shape {
        v
    }
    fn echo_enum(v: Colour) -> Colour {
        v
    }
    fn echo_flags(v: Access) -> Access {
        v
    }
    fn echo_tuple(v: (String, u16, bool)) -> (String, u16, bool) {
        v
    }
    fn echo_list(v: Vec<Point>) -> Vec<Point> {
        v
    }
    fn echo_bytes(v: Vec<u8>) -> Vec<u8> {
        v
    }
    fn echo_result(text: String, fail: Option<u32>) -> Result<String, Point> {
        match fail {
            Some(code) => Err(Point {
                x: code as i32,
                y: 0,
                label: Some(text),
            }),
            None => Ok(text),
        }
    }
}

export!(Typed);

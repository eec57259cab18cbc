package gpu

import "testing"

func TestElementRoundTrip(t *testing.T) {
	for _, d := range DTypes {
		b := make([]byte, 3*d.Size())
		if d.IsFloat() {
			d.SetFloat(b, 2, -1.5)
			if got := d.Float(b, 2); got != -1.5 {
				t.Errorf("%s: Float after SetFloat(-1.5) = %v", d, got)
			}
			if d.Float(b, 0) != 0 {
				t.Errorf("%s: SetFloat wrote outside its element", d)
			}
			continue
		}
		d.SetInt(b, 1, -3)
		want := d.Wrap(-3)
		if got := d.Int(b, 1); got != want {
			t.Errorf("%s: Int after SetInt(-3) = %d, want %d", d, got, want)
		}
		if d.Int(b, 0) != 0 || d.Int(b, 2) != 0 {
			t.Errorf("%s: SetInt wrote outside its element", d)
		}
	}
}

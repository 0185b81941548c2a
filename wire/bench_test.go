package wire

import "testing"

func BenchmarkBatchEncode32(b *testing.B) {
	bt := NewBatch(0)
	msg := make([]byte, 32)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		bt.Reset(TypeData, testOrigin, 1)
		for bt.Add(msg) {
			n++
		}
		_ = bt.Bytes()
	}
	b.ReportMetric(float64(n)/float64(b.N), "msgs/op")
}

func BenchmarkParseIterate32(b *testing.B) {
	bt := NewBatch(0)
	bt.Reset(TypeData, testOrigin, 1)
	msg := make([]byte, 32)
	for bt.Add(msg) {
	}
	frame := bt.Bytes()
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		f, _, err := Parse(frame)
		if err != nil {
			b.Fatal(err)
		}
		it := f.Messages()
		for {
			if _, _, ok := it.Next(); !ok {
				break
			}
		}
	}
}

func BenchmarkAckEncodeParse(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		a := Ack{Origin: testOrigin, Seq: 12345}
		f, _, err := Parse(a.Append(buf[:0]))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = DecodeAck(&f)
	}
}

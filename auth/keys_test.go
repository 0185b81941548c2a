package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// testMaster is a fixed master key for tests: bytes 1..32.
func testMaster() MasterKey {
	var k MasterKey
	for i := range k {
		k[i] = byte(i + 1)
	}
	return k
}

const testHex = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"

func TestParseKeyFile(t *testing.T) {
	want := testMaster()
	tests := []struct {
		name string
		data string
		ok   bool
	}{
		{"canonical", "seqbus-master-key v1 " + testHex + "\n", true},
		{"no newline", "seqbus-master-key v1 " + testHex, true},
		{"crlf", "seqbus-master-key v1 " + testHex + "\r\n", true},
		{"upper case hex", "seqbus-master-key v1 " + strings.ToUpper(testHex) + "\n", true},
		{"empty", "", false},
		{"bare hex", testHex + "\n", false},
		{"other version", "seqbus-master-key v2 " + testHex + "\n", false},
		{"two newlines", "seqbus-master-key v1 " + testHex + "\n\n", false},
		{"lone cr", "seqbus-master-key v1 " + testHex + "\r", false},
		{"second line", "seqbus-master-key v1 " + testHex + "\nseqbus-master-key v1 " + testHex + "\n", false},
		{"trailing space", "seqbus-master-key v1 " + testHex + " \n", false},
		{"leading space", " seqbus-master-key v1 " + testHex + "\n", false},
		{"short key", "seqbus-master-key v1 " + testHex[:62] + "\n", false},
		{"long key", "seqbus-master-key v1 " + testHex + "00\n", false},
		{"not hex", "seqbus-master-key v1 " + testHex[:63] + "g\n", false},
		{"all zeros", "seqbus-master-key v1 " + strings.Repeat("0", 64) + "\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKeyFile([]byte(tc.data))
			if tc.ok {
				if err != nil || k != want {
					t.Fatalf("ParseKeyFile = %x, %v; want the test key", k[:], err)
				}
				return
			}
			if !errors.Is(err, ErrKeyFile) {
				t.Fatalf("ParseKeyFile err = %v, want ErrKeyFile", err)
			}
			if k != (MasterKey{}) {
				t.Fatalf("a refused file returned key material")
			}
			if strings.Contains(err.Error(), testHex[:16]) {
				t.Fatalf("error quotes key material: %v", err)
			}
		})
	}
}

func TestFormatKeyFileRoundTrip(t *testing.T) {
	k := testMaster()
	b := FormatKeyFile(k)
	if string(b) != "seqbus-master-key v1 "+testHex+"\n" || len(b) != KeyFileLen {
		t.Fatalf("FormatKeyFile = %q (len %d, KeyFileLen %d)", b, len(b), KeyFileLen)
	}
	got, err := ParseKeyFile(b)
	if err != nil || got != k {
		t.Fatalf("round trip: %v", err)
	}
}

func TestGenerateMasterKey(t *testing.T) {
	src := bytes.Repeat([]byte{7}, KeyLen)
	k, err := GenerateMasterKey(bytes.NewReader(src))
	if err != nil || !bytes.Equal(k[:], src) {
		t.Fatalf("GenerateMasterKey from reader = %x, %v", k[:], err)
	}
	if _, err := GenerateMasterKey(bytes.NewReader(src[:KeyLen-1])); !errors.Is(err, ErrKeyFile) {
		t.Fatalf("short reader: err = %v, want ErrKeyFile", err)
	}
	a, err1 := GenerateMasterKey(nil)
	b, err2 := GenerateMasterKey(nil)
	if err1 != nil || err2 != nil || a == b || a == (MasterKey{}) {
		t.Fatalf("crypto/rand keys: %v %v, equal=%v", err1, err2, a == b)
	}
}

func TestKeysRedacted(t *testing.T) {
	m := testMaster()
	d := DataKey(&m, 1, 1)
	for _, s := range []string{fmt.Sprint(m), fmt.Sprintf("%s %v %x %d %#v", m, m, m, m, m), fmt.Sprint(d), fmt.Sprintf("%x %d %+v", d, d, d)} {
		if !strings.Contains(s, "redacted") || strings.Contains(s, "0102") || strings.Contains(s, "1 2 3") || strings.Contains(s, "0x1") {
			t.Fatalf("formatted key %q is not redacted", s)
		}
	}
}

// hkdfByHand is RFC 5869 with SHA-256, an empty salt and one output block,
// written out from the RFC so that the info layout of DataKey, LeaseKey and
// ClientKey is checked against an independent computation.
func hkdfByHand(secret, info []byte) Key {
	extract := hmac.New(sha256.New, make([]byte, sha256.Size))
	extract.Write(secret)
	prk := extract.Sum(nil)
	expand := hmac.New(sha256.New, prk)
	expand.Write(info)
	expand.Write([]byte{1})
	var k Key
	copy(k[:], expand.Sum(nil))
	return k
}

func TestDerivedKeysKnownLayout(t *testing.T) {
	m := testMaster()
	data := append([]byte("seqbus data v1\x00"), binary.LittleEndian.AppendUint16(nil, 0x0102)...)
	data = binary.LittleEndian.AppendUint64(data, 0x0a0b0c0d0e0f1011)
	lease := append([]byte("seqbus lease v1\x00"), binary.LittleEndian.AppendUint16(nil, 0x0102)...)
	lease = binary.LittleEndian.AppendUint32(lease, 0xdeadbeef)
	client := append([]byte("seqbus client v1\x00"), binary.LittleEndian.AppendUint16(nil, 0x0102)...)
	tests := []struct {
		name string
		got  Key
		info []byte
	}{
		{"data", DataKey(&m, 0x0102, 0x0a0b0c0d0e0f1011), data},
		{"lease", LeaseKey(&m, 0x0102, 0xdeadbeef), lease},
		{"client", ClientKey(&m, 0x0102), client},
	}
	for _, tc := range tests {
		if want := hkdfByHand(m[:], tc.info); tc.got != want {
			t.Errorf("%s key differs from RFC 5869 by hand with info %q", tc.name, tc.info)
		}
	}
}

func TestDerivedKeysDistinct(t *testing.T) {
	m := testMaster()
	other := testMaster()
	other[0] ^= 1
	keys := map[Key]string{}
	add := func(name string, k Key) {
		if prev, dup := keys[k]; dup {
			t.Fatalf("%s equals %s", name, prev)
		}
		keys[k] = name
	}
	for stream := uint16(0); stream < 3; stream++ {
		for v := uint64(0); v < 3; v++ {
			add(fmt.Sprintf("data(%d,%d)", stream, v), DataKey(&m, stream, v))
			add(fmt.Sprintf("lease(%d,%d)", stream, v), LeaseKey(&m, stream, uint32(v)))
			add(fmt.Sprintf("other master data(%d,%d)", stream, v), DataKey(&other, stream, v))
		}
		add(fmt.Sprintf("client(%d)", stream), ClientKey(&m, stream))
	}
	if first, again := DataKey(&m, 1, 2), DataKey(&m, 1, 2); first != again {
		t.Fatal("derivation is not deterministic")
	}
}

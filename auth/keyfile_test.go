package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeygenLoadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seqbus.key")
	k, err := Keygen(path)
	if err != nil {
		t.Fatalf("Keygen: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v (%v), want 0600", fi.Mode(), err)
	}
	got, err := LoadKeyFile(path)
	if err != nil || got != k {
		t.Fatalf("LoadKeyFile = %v, want the generated key", err)
	}
	if _, err := Keygen(path); !errors.Is(err, ErrKeyFile) || !errors.Is(err, os.ErrExist) {
		t.Fatalf("Keygen over an existing file: err = %v, want ErrKeyFile and ErrExist", err)
	}
	if again, _ := LoadKeyFile(path); again != k {
		t.Fatal("a refused Keygen changed the existing key file")
	}
}

func TestLoadKeyFileRefuses(t *testing.T) {
	dir := t.TempDir()
	good := FormatKeyFile(testMaster())
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is masked by the umask
			t.Fatal(err)
		}
		return p
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(write("target", good, 0o600), link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		path      string
		perm      bool   // want ErrKeyPermissions (and ErrKeyFile)
		inMessage string // besides the path
	}{
		{"group readable", write("g", good, 0o640), true, "0640"},
		{"other readable", write("o", good, 0o604), true, "0604"},
		{"group writable only", write("gw", good, 0o620), true, "0620"},
		{"other executable", write("ox", good, 0o601), true, "0601"},
		{"symlink", link, true, "not a regular file"},
		{"directory", dir, true, "not a regular file"},
		{"missing", filepath.Join(dir, "missing"), false, "no such file"},
		{"garbage", write("garbage", []byte("hello\n"), 0o600), false, "seqbus-master-key v1"},
		{"too long", write("long", append(good, strings.Repeat("x", 100)...), 0o600), false, "longer than a key file"},
		{"empty", write("empty", nil, 0o600), false, "does not start with"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := LoadKeyFile(tc.path)
			if err == nil || k != (MasterKey{}) {
				t.Fatalf("LoadKeyFile accepted %s", tc.path)
			}
			if !errors.Is(err, ErrKeyFile) || errors.Is(err, ErrKeyPermissions) != tc.perm {
				t.Fatalf("err = %v; want ErrKeyFile, ErrKeyPermissions=%v", err, tc.perm)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.path) || !strings.Contains(msg, tc.inMessage) {
				t.Fatalf("err = %q; want it to name %s and say %q", msg, tc.path, tc.inMessage)
			}
		})
	}
}

func TestLoadKeyFileAcceptsOwnerOnlyModes(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []os.FileMode{0o400, 0o600, 0o700} {
		p := filepath.Join(dir, mode.String())
		if err := os.WriteFile(p, FormatKeyFile(testMaster()), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if k, err := LoadKeyFile(p); err != nil || k != testMaster() {
			t.Errorf("mode %v: LoadKeyFile = %v", mode, err)
		}
	}
}

func TestWriteKeyFileBadDirectory(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no", "such", "dir", "key")
	if err := WriteKeyFile(p, testMaster()); !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v, want ErrKeyFile naming %s", err, p)
	}
}

// TestKeyFileErrorsSayAuthOnce: every key file error names the path and
// says "auth:" once (they used to read "auth: bad key file: auth: key
// file permissions ..." and "PATH: auth: bad key file: ...").
func TestKeyFileErrorsSayAuthOnce(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, FormatKeyFile(testMaster()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	exists := filepath.Join(dir, "exists")
	if err := os.WriteFile(exists, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOpen := LoadKeyFile(open)
	_, errGarbage := LoadKeyFile(garbage)
	_, errMissing := LoadKeyFile(filepath.Join(dir, "missing"))
	_, errExists := Keygen(exists)
	for _, err := range []error{errOpen, errGarbage, errMissing, errExists} {
		if err == nil {
			t.Fatal("a bad key file was accepted")
		}
		msg := err.Error()
		if strings.Count(msg, "auth:") != 1 || !strings.Contains(msg, dir) || strings.Contains(msg, ": open "+dir) {
			t.Errorf("%q: want \"auth:\" once and the path, not the system's repeat of it", msg)
		}
	}
	if !errors.Is(errOpen, ErrKeyPermissions) || !errors.Is(errOpen, ErrKeyFile) || !errors.Is(errExists, os.ErrExist) {
		t.Errorf("sentinels lost: %v / %v", errOpen, errExists)
	}
}

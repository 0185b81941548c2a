package flagcheck

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
)

// ApplyFile sets every flag of fs named in the config file at path,
// except those in skip (the ones given on the command line, which win).
// The file holds one `name = value` a line (the flag's name without
// dashes; `#` starts a comment; a repeatable flag may appear on several
// lines; quotes around a value are dropped). An unknown name, a line
// that is not `name = value`, a nested config or a bad value is an error
// naming the file and line.
func ApplyFile(fs *flag.FlagSet, path string, skip map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = strings.TrimSpace(text[:i])
		}
		if text == "" {
			continue
		}
		name, value, ok := strings.Cut(text, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return fmt.Errorf("%s:%d: want `name = value`, got %q", path, line, text)
		}
		name = strings.TrimLeft(name, "-")
		if name == "config" {
			return fmt.Errorf("%s:%d: a config file cannot include another", path, line)
		}
		if fs.Lookup(name) == nil {
			return fmt.Errorf("%s:%d: unknown setting %q for `seqbus %s` (see --help)", path, line, name, fs.Name())
		}
		if skip[name] {
			continue
		}
		if err := fs.Set(name, strings.Trim(value, `"`)); err != nil {
			return fmt.Errorf("%s:%d: %s = %s: %w", path, line, name, value, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	return nil
}

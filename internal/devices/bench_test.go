package devices

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jaypipes/pcidb"
)

// BenchmarkPCIIDsParse is the cost of the pci.ids fallback (jaypipes/pcidb
// parses the whole file), paid only when a GPU is not in the built-in
// table.
func BenchmarkPCIIDsParse(b *testing.B) {
	if _, err := os.Stat("/usr/share/misc/pci.ids"); err != nil {
		b.Skip("no /usr/share/misc/pci.ids")
	}
	for b.Loop() {
		if _, err := pcidb.New(pcidb.WithChroot("/")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTableLookup is the built-in table's cost per GPU.
func BenchmarkTableLookup(b *testing.B) {
	for b.Loop() {
		if _, ok := lookupPCI(VendorAMD, 0x1586); !ok {
			b.Fatal("missing")
		}
	}
}

// BenchmarkDiscoverFixture is a whole discovery of a recorded machine.
func BenchmarkDiscoverFixture(b *testing.B) {
	root := filepath.Join("testdata", "sysfs", "rtx3090-780m")
	for b.Loop() {
		if _, err := Discover(context.Background(), Options{Root: root}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseListDevices(b *testing.B) {
	in, err := os.ReadFile(filepath.Join("testdata", "listdevices", "vulkan-3090-780m.txt"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := ParseListDevices(in); err != nil {
			b.Fatal(err)
		}
	}
}

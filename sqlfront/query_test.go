package sqlfront

import "testing"

func TestTimeText(t *testing.T) {
	for us, want := range map[int64]string{
		0:           "00:00:00",
		45296789000: "12:34:56.789",
		86399999999: "23:59:59.999999",
		86400000000: "24:00:00",
		3600000010:  "01:00:00.00001",
	} {
		if got := timeText(us); got != want {
			t.Errorf("timeText(%d) = %q, want %q", us, got, want)
		}
	}
}

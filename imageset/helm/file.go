package helm

import (
	"fmt"
	"os"
)

func readFile(p string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading packaged chart: %w", err)
	}
	return data, nil
}

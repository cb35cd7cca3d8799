//go:build race

package private

const raceBuild = true

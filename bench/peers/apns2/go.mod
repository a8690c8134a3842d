module herald/bench/peers/apns2

go 1.21

require (
	github.com/sideshow/apns2 v0.25.0
	golang.org/x/net v0.0.0-20220403103023-749bd193bc2b
)

require (
	github.com/golang-jwt/jwt/v4 v4.4.1 // indirect
	golang.org/x/text v0.3.7 // indirect
)

module dovetail

go 1.26

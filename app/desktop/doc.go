// Package desktop is Dovetail's desktop app: a chat that shows speculation
// and learning as they happen, the setup wizard, the speed and learning
// view and the settings, on fyne. It runs models through app/runner and
// imports no device package; app/dovetail-desktop is its main. Everything
// it shows is testable with fyne's test driver.
package desktop

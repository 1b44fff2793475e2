#!/usr/bin/env python3
"""Asks an X11 window to close the way a window manager's close button does.

Usage: close-window.py TITLE   (on $DISPLAY; exits 1 when no window has that title)

Sends the window a WM_DELETE_WINDOW client message (ICCCM), which GTK turns into the window's
delete event: the app sees a person closing its window. Under Xvfb there is no window manager
to do it, and WebDriver's "close window" ends the app without letting it clean up. libX11
through ctypes, so the test needs no extra package.
"""
import ctypes
import ctypes.util
import sys

CLIENT_MESSAGE = 33  # X.h ClientMessage

Window = ctypes.c_ulong
Atom = ctypes.c_ulong


class XClientMessageEvent(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("serial", ctypes.c_ulong),
        ("send_event", ctypes.c_int),
        ("display", ctypes.c_void_p),
        ("window", Window),
        ("message_type", Atom),
        ("format", ctypes.c_int),
        ("data", ctypes.c_long * 5),
    ]


class XEvent(ctypes.Union):
    _fields_ = [("xclient", XClientMessageEvent), ("pad", ctypes.c_long * 24)]


def load_xlib():
    xlib = ctypes.cdll.LoadLibrary(ctypes.util.find_library("X11") or "libX11.so.6")
    xlib.XOpenDisplay.restype = ctypes.c_void_p
    xlib.XOpenDisplay.argtypes = [ctypes.c_char_p]
    xlib.XDefaultRootWindow.restype = Window
    xlib.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
    xlib.XInternAtom.restype = Atom
    xlib.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    xlib.XQueryTree.argtypes = [
        ctypes.c_void_p,
        Window,
        ctypes.POINTER(Window),
        ctypes.POINTER(Window),
        ctypes.POINTER(ctypes.POINTER(Window)),
        ctypes.POINTER(ctypes.c_uint),
    ]
    xlib.XFetchName.argtypes = [ctypes.c_void_p, Window, ctypes.POINTER(ctypes.c_void_p)]
    xlib.XFree.argtypes = [ctypes.c_void_p]
    xlib.XSendEvent.argtypes = [ctypes.c_void_p, Window, ctypes.c_int, ctypes.c_long, ctypes.POINTER(XEvent)]
    xlib.XFlush.argtypes = [ctypes.c_void_p]
    xlib.XCloseDisplay.argtypes = [ctypes.c_void_p]
    return xlib


def window_title(xlib, display, window):
    name = ctypes.c_void_p()
    if not xlib.XFetchName(display, window, ctypes.byref(name)) or not name.value:
        return None
    title = ctypes.string_at(name.value).decode("utf-8", "replace")
    xlib.XFree(name)
    return title


def find_window(xlib, display, window, title):
    """The first window named `title` in the tree under `window`, depth first."""
    if window_title(xlib, display, window) == title:
        return window
    root, parent = Window(), Window()
    children = ctypes.POINTER(Window)()
    count = ctypes.c_uint()
    if not xlib.XQueryTree(display, window, ctypes.byref(root), ctypes.byref(parent), ctypes.byref(children), ctypes.byref(count)):
        return None
    try:
        for i in range(count.value):
            found = find_window(xlib, display, children[i], title)
            if found:
                return found
    finally:
        if children:
            xlib.XFree(children)
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: close-window.py TITLE")
    xlib = load_xlib()
    display = xlib.XOpenDisplay(None)
    if not display:
        sys.exit("close-window.py: cannot open the display $DISPLAY")
    try:
        window = find_window(xlib, display, xlib.XDefaultRootWindow(display), sys.argv[1])
        if not window:
            print(f"close-window.py: no window titled {sys.argv[1]!r}", file=sys.stderr)
            sys.exit(1)
        event = XEvent()
        event.xclient.type = CLIENT_MESSAGE
        event.xclient.window = window
        event.xclient.message_type = xlib.XInternAtom(display, b"WM_PROTOCOLS", False)
        event.xclient.format = 32
        event.xclient.data[0] = xlib.XInternAtom(display, b"WM_DELETE_WINDOW", False)
        event.xclient.data[1] = 0  # CurrentTime
        xlib.XSendEvent(display, window, False, 0, ctypes.byref(event))
        xlib.XFlush(display)
    finally:
        xlib.XCloseDisplay(display)


if __name__ == "__main__":
    main()

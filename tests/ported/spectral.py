"""Low-pass filtering and a power spectrum with the real FFT."""
import numpy as np

INPUTS = {"signal": ((256,), "float64")}


def program(signal, keep=20):
    spectrum = np.fft.rfft(signal)
    power = np.abs(spectrum) ** 2 / signal.size
    freqs = np.fft.rfftfreq(signal.size, d=1.0 / 256)
    filtered = np.fft.irfft(np.where(np.arange(spectrum.size) < keep, spectrum, 0),
                            n=signal.size)
    return filtered, power, freqs[np.argmax(power[1:]) + 1]

"""Velocity Verlet for a softened gravitational N-body system."""
import numpy as np

INPUTS = {"pos": ((32, 3), "float64"), "vel": ((32, 3), "float64"), "mass": ((32,), "float64")}


def accelerations(pos, mass, softening=0.1):
    d = pos[np.newaxis, :, :] - pos[:, np.newaxis, :]
    inv_r3 = (np.sum(d ** 2, axis=-1) + softening ** 2) ** -1.5
    return np.einsum("ij,ijk,j->ik", inv_r3, d, mass)


def energy(pos, vel, mass, softening=0.1):
    kinetic = 0.5 * np.sum(mass[:, None] * vel ** 2)
    r = np.sqrt(np.sum((pos[:, None, :] - pos[None, :, :]) ** 2, axis=-1) + softening ** 2)
    potential = -0.5 * np.sum(np.triu(np.outer(mass, mass) / r, k=1)) * 2
    return kinetic + potential


def program(pos, vel, mass, steps=10, dt=0.01):
    acc = accelerations(pos, mass)
    for _ in range(steps):
        vel += 0.5 * dt * acc
        pos += dt * vel
        acc = accelerations(pos, mass)
        vel += 0.5 * dt * acc
    return pos, vel, energy(pos, vel, mass)

#!/usr/bin/python3
"""A Modbus device for edgemux's interop tests, served by pymodbus (Debian's
python3-pymodbus): Modbus TCP on a port, or RTU on a serial device (one end
of a socat pty pair, 8N1). Each unit id given answers; others stay silent, like a
device that is not there. Holding register i starts at 1000+i, input
register i at 2000+i, coil i at i%2, discrete input i at (i+1)%2.

  pydevice.py tcp PORT UNITS        e.g. tcp 15020 1,2
  pydevice.py rtu DEVICE BAUD UNITS e.g. rtu /dev/pts/5 19200 1,2
"""
import logging
import sys
import termios
import time

import serial

from pymodbus.datastore import (ModbusSequentialDataBlock, ModbusServerContext,
                                ModbusSlaveContext)
from pymodbus.server import StartSerialServer, StartTcpServer
from pymodbus.transaction import ModbusRtuFramer, ModbusSocketFramer

logging.disable(logging.CRITICAL)  # pymodbus logs every exception it answers and every closed connection


def unit(n):
    # pymodbus addresses the blocks 1-based internally: block address 1 is
    # protocol address 0.
    return ModbusSlaveContext(
        hr=ModbusSequentialDataBlock(1, [1000 + i for i in range(2000)]),
        ir=ModbusSequentialDataBlock(1, [2000 + i for i in range(2000)]),
        co=ModbusSequentialDataBlock(1, [i % 2 for i in range(2000)]),
        di=ModbusSequentialDataBlock(1, [(i + 1) % 2 for i in range(2000)]),
        zero_mode=False)


def settle(port, baud):
    """Opens the pty until its settings take: right after socat made it,
    tcsetattr on a pty sometimes fails with EINVAL, and pymodbus would
    then serve nothing without a word."""
    for _ in range(50):
        try:
            serial.Serial(port, baudrate=baud, parity="N").close()
            return
        except (serial.SerialException, termios.error):
            time.sleep(0.1)


def main():
    kind = sys.argv[1]
    units = [int(u) for u in sys.argv[-1].split(",")]
    ctx = ModbusServerContext(slaves={u: unit(u) for u in units}, single=False)
    if kind == "tcp":
        StartTcpServer(context=ctx, address=("127.0.0.1", int(sys.argv[2])),
                       framer=ModbusSocketFramer, ignore_missing_slaves=True)
    else:
        settle(sys.argv[2], int(sys.argv[3]))
        StartSerialServer(context=ctx, port=sys.argv[2], baudrate=int(sys.argv[3]),
                          framer=ModbusRtuFramer, parity="N", stopbits=1, bytesize=8,
                          ignore_missing_slaves=True)


if __name__ == "__main__":
    main()

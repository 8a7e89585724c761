"""hsitp.parallel"""

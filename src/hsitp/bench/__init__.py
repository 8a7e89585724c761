"""hsitp.bench"""

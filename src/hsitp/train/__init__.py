"""hsitp.train"""
